"""Single-head attention with a large head dim (the Wan VAE encoder's mid-block attention) as a Triton kernel.

The encoder attends over the L = H x W tokens of each frame with one head of D = 384 (Wan2.1) or 640 (Wan2.2)
channels. PyTorch's flash kernels stop at D = 256, so SDPA runs a slower kernel there. This is the flash-attention
forward pass written for such D:

    O = softmax(Q K^T / sqrt(D)) V,  one [L, D] problem per frame (the batch entries).

One Triton program owns BLOCK_M query rows of one frame and walks the keys in blocks of BLOCK_N with the online
softmax, in fp32: for each key block it forms the logits S = Q K^T (scaled by log2(e) / sqrt(D), so that exp2
gives the exponentials), the new row maxima m' = max(m, rowmax S), rescales what it holds by exp2(m - m'), adds
P = exp2(S - m') to the row sums l, and adds P V (P rounded to the operands' dtype, as every flash kernel does)
to the output accumulator. At the end O = acc / l, rounded once.

Triton's blocks have power-of-two shapes and D is not one (384 = 3 x 128, 640 = 5 x 128), so D is cut into
CHUNKS chunks of CHUNK channels: S is the sum of the CHUNKS per-chunk dots Q_c K_c^T (accumulated in fp32 in the
chunks' order), and the output keeps one fp32 accumulator of [BLOCK_M, CHUNK] per chunk, acc_c += P V_c. The
accumulators are a Triton tuple built and updated by `tl.static_range` loops (unrolled at compile time), so one
kernel serves any number of chunks. The query chunks are loaded once, before the key loop, and stay in shared
memory (Triton hoists a query load written inside the loop there anyway); key and value chunks stream through a
`stages`-deep software pipeline. Shared memory (227 KB a block on an H200) and registers (the accumulators: 64
rows x 384 fp32 channels is 192 registers a thread for a warpgroup) bound the tiles; `config_for` says which fit.

Where D x BLOCK_M accumulators do not fit (D = 640), a grid axis splits the output channels into `splits` equal
groups of chunks: each program still forms the whole logits S (so QK^T is computed `splits` times: 1.5x the
flops for two splits) but keeps and writes only its own group's accumulators. Every program of a row block
computes the same S, maxima and sums, in the same order.

Rows past L are loaded as zeros and never stored; keys past L get logit -inf, so they add nothing (every key
block holds at least one real key, so the maxima stay finite). q, k and v may be strided views (the three chunks
of one qkv projection: rows 3D apart); only the channels must be contiguous. The launch configuration is fixed by
D (`config_for`): no autotuning, no atomics, a fixed summation order, so the same bits in every process. On the
CPU, without Triton, or for a D without a configuration, `single_head_attention` runs PyTorch's SDPA.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

try:  # Triton ships with CUDA builds of torch; CPU-only installs use SDPA.
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the torch build
    triton = None

LOG2_E = 1.4426950408889634
MAX_HEAD_DIM = 640  # the widest head dim with a configuration (Wan2.2's VAE)


@dataclass(frozen=True)
class AttentionConfig:
    """One launch of the kernel: BLOCK_M query rows per program, keys in blocks of BLOCK_N, D in chunks of
    `chunk` channels, `warps` warps, `stages` software-pipeline stages, and the output channels split over
    `splits` programs (each recomputing the logits)."""

    block_m: int
    block_n: int
    chunk: int
    warps: int
    stages: int
    splits: int = 1


def config_for(head_dim: int) -> AttentionConfig:
    """The fixed rule that picks the launch configuration from D alone (no timing, and not the number of frames:
    the same bits in every process and for a frame in any window). Measured on an H200 (bench/kernels/attention.py):

    D <= 384: 128 query rows (two warpgroups of 64, each holding 64 x D fp32 accumulators: 192 registers a thread
    at 384), keys in blocks of 32, two stages; shared memory: Q 96 KB + 2 x (K, V) 48 KB = 192 KB at 384. At
    N=24, L=6240, D=384: 3.7-3.8 ms (~380 TFLOP/s) against SDPA's 9.7-10 ms; at N=4, 0.86 ms against 1.74 ms
    (64 rows on 4 warps, three stages, fills the GPU better there, 0.71-0.75 ms, but is 4.0 ms at N=24).

    384 < D <= 640 (D a multiple of 128): D x 64 query rows of accumulators is too many registers and the Q tile
    too much shared memory for 128 rows, so the output is split in two halves over a grid axis (each program
    recomputes the logits: 1.5x the flops) with 64 rows, keys in blocks of 32, chunks of 64 channels, 4 warps.
    At N=12, L=3520, D=640: 2.4 ms against SDPA's 2.7 ms; at N=4, 1.02 ms against 0.99 ms (one program per row
    block, 64 rows on 8 warps, keys in blocks of 16, three stages: 2.7-2.8 ms and 1.08 ms)."""
    if head_dim % 64 or head_dim <= 0:
        raise ValueError(f"the kernel needs a head dim that is a multiple of 64, not {head_dim}")
    if head_dim <= 384:
        return AttentionConfig(block_m=128, block_n=32, chunk=128 if head_dim % 128 == 0 else 64, warps=8, stages=2)
    if head_dim <= MAX_HEAD_DIM and head_dim % 128 == 0:
        return AttentionConfig(block_m=64, block_n=32, chunk=64, warps=4, stages=2, splits=2)
    raise ValueError(f"the kernel has no configuration for head dim {head_dim}: above 384 it takes multiples of "
                     f"128 up to {MAX_HEAD_DIM}")


def kernel_applies(q: torch.Tensor) -> bool:
    """Whether `single_head_attention` runs the Triton kernel for this query tensor: on CUDA with Triton, where
    `config_for` has a configuration for its head dim."""
    head_dim = q.shape[-1]
    has_config = head_dim % 64 == 0 and (head_dim <= 384 or (head_dim <= MAX_HEAD_DIM and head_dim % 128 == 0))
    return triton is not None and q.is_cuda and has_config


def single_head_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(D)) v for [N, L, D] q, k, v (one head per batch entry), in q's dtype.

    The Triton kernel on CUDA for the head dims it has a configuration for (`kernel_applies`: multiples of 64 up
    to 384, multiples of 128 up to 640); elsewhere the SDPA call the encoder made before."""
    _check(q, k, v)
    if kernel_applies(q):
        return attention(q, k, v, config_for(q.shape[-1]))
    return F.scaled_dot_product_attention(q[:, None], k[:, None], v[:, None])[:, 0]


def _check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    if q.dim() != 3 or q.shape != k.shape or q.shape != v.shape:
        raise ValueError(f"q, k and v must be [N, L, D] of one shape, got {tuple(q.shape)}, {tuple(k.shape)} and "
                         f"{tuple(v.shape)}")
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"q, k and v must share a dtype, got {q.dtype}, {k.dtype} and {v.dtype}")


def _channels_contiguous(tensor: torch.Tensor) -> torch.Tensor:
    return tensor if tensor.stride(-1) == 1 else tensor.contiguous()


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, config: AttentionConfig) -> torch.Tensor:
    """Launch the Triton kernel under `config` (a CUDA tensor, or a CPU one under TRITON_INTERPRET=1)."""
    if triton is None:
        raise RuntimeError("the attention kernel needs Triton")
    _check(q, k, v)
    batch, length, head_dim = q.shape
    if head_dim % (config.chunk * config.splits):
        raise ValueError(f"head dim {head_dim} is not a multiple of the chunk {config.chunk} times the "
                         f"{config.splits} output splits")
    q, k, v = (_channels_contiguous(t) for t in (q, k, v))
    out = torch.empty((batch, length, head_dim), dtype=q.dtype, device=q.device)
    grid = (triton.cdiv(length, config.block_m), batch, config.splits)
    _attention_forward[grid](
        q, k, v, out, length,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1), out.stride(0), out.stride(1),
        LOG2_E / math.sqrt(head_dim),
        BLOCK_M=config.block_m, BLOCK_N=config.block_n, CHUNK=config.chunk, CHUNKS=head_dim // config.chunk,
        OUT_CHUNKS=head_dim // config.chunk // config.splits, num_warps=config.warps, num_stages=config.stages,
    )
    return out


if triton is not None:

    @triton.jit
    def _attention_forward(q_ptr, k_ptr, v_ptr, o_ptr, length, q_stride_b, q_stride_l, k_stride_b, k_stride_l,
                           v_stride_b, v_stride_l, o_stride_b, o_stride_l, scale_log2,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CHUNK: tl.constexpr,
                           CHUNKS: tl.constexpr, OUT_CHUNKS: tl.constexpr):
        batch = tl.program_id(1)
        row = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        row_ok = row < length
        channel = tl.arange(0, CHUNK)
        key_offset = tl.arange(0, BLOCK_N)
        first_out = tl.program_id(2) * OUT_CHUNKS * CHUNK  # the first output channel this program writes
        q_rows = q_ptr + batch * q_stride_b + row[:, None] * q_stride_l
        k_base = k_ptr + batch * k_stride_b
        v_base = v_ptr + batch * v_stride_b

        queries = ()  # loaded once: Triton keeps them in shared memory for the whole key loop
        accumulators = ()
        for c in tl.static_range(CHUNKS):
            queries = queries + (tl.load(q_rows + c * CHUNK + channel[None, :], mask=row_ok[:, None], other=0.0),)
        for c in tl.static_range(OUT_CHUNKS):
            accumulators = accumulators + (tl.zeros([BLOCK_M, CHUNK], dtype=tl.float32),)
        row_max = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
        row_sum = tl.zeros([BLOCK_M], dtype=tl.float32)

        for start in range(0, length, BLOCK_N):
            key = start + key_offset
            key_ok = key < length
            logits = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
            for c in tl.static_range(CHUNKS):  # S = sum over chunks of Q_c K_c^T
                keys_t = tl.load(k_base + key[None, :] * k_stride_l + c * CHUNK + channel[:, None],
                                 mask=key_ok[None, :], other=0.0)  # [CHUNK, BLOCK_N]
                logits = tl.dot(queries[c], keys_t, logits)
            logits = tl.where(key_ok[None, :], logits * scale_log2, float("-inf"))
            new_max = tl.maximum(row_max, tl.max(logits, axis=1))
            rescale = tl.exp2(row_max - new_max)
            p = tl.exp2(logits - new_max[:, None])
            row_sum = row_sum * rescale + tl.sum(p, axis=1)
            p = p.to(v_ptr.dtype.element_ty)
            row_max = new_max
            updated = ()
            for c in tl.static_range(OUT_CHUNKS):  # acc_c = acc_c * rescale + P V_c
                values = tl.load(v_base + key[:, None] * v_stride_l + first_out + c * CHUNK + channel[None, :],
                                 mask=key_ok[:, None], other=0.0)  # [BLOCK_N, CHUNK]
                updated = updated + (tl.dot(p, values, accumulators[c] * rescale[:, None]),)
            accumulators = updated

        o_rows = o_ptr + batch * o_stride_b + row[:, None] * o_stride_l + first_out
        for c in tl.static_range(OUT_CHUNKS):
            out = accumulators[c] / row_sum[:, None]
            tl.store(o_rows + c * CHUNK + channel[None, :], out.to(o_ptr.dtype.element_ty), mask=row_ok[:, None])
