"""Fused elementwise kernels of the fast Wan2.1 encoder: residual add + RMS norm + SiLU in one pass.

Tensors are channels-last 3D ([B,C,T,H,W] stored as B,T,H,W,C), so every spatio-temporal position is a row of
C contiguous channels. One Triton program normalises a block of rows: it reads the conv output (and the
residual shortcut), writes their bf16 sum when the next block needs it as its own shortcut, and writes
silu(normalize(sum) * weight) into the (time-offset) buffer the next causal conv reads. On the CPU, or without
Triton, the same maths runs eagerly. Rounding follows the reference: the sum is rounded to the compute dtype
first, the norm is computed from that rounded sum in fp32 and rounded once.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

try:  # Triton ships with CUDA builds of torch; CPU-only installs use the eager path.
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the torch build
    triton = None


def add_rms_silu(
    a: torch.Tensor,
    b: torch.Tensor | None,
    weight: torch.Tensor | None,
    norm_out: torch.Tensor | None,
    sum_out: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
) -> None:
    """sum = round(a + bias + b); norm_out <- silu(normalize(sum over channels) * weight); sum_out <- sum.

    `a` is a convolution output without its bias: adding the bias here saves PyTorch's separate (and, in
    channels-last, unvectorised) bias pass. `b` None means no residual; `norm_out` None skips the norm (a plain
    residual add into `sum_out`). `weight` and `bias` are fp32 with C elements (weight = gamma * sqrt(C)).
    """
    if triton is not None and a.is_cuda:
        _launch(a, b, weight, norm_out, sum_out, bias)
        return
    total = a.float()
    if bias is not None:
        total = total + bias.reshape(1, -1, 1, 1, 1)
    if b is not None:
        total = total + b.float()
    total = total.to(a.dtype)
    if sum_out is not None:
        sum_out.copy_(total)
    if norm_out is not None:
        y = F.normalize(total.float(), dim=1) * weight.reshape(1, -1, 1, 1, 1)
        norm_out.copy_(F.silu(y))


def _channel_rows(tensor: torch.Tensor | None) -> torch.Tensor | None:
    """The tensor with each voxel's channels contiguous (channels-last 3D): itself, or a copy in that layout."""
    if tensor is None or tensor.is_contiguous(memory_format=torch.channels_last_3d):
        return tensor
    return tensor.contiguous(memory_format=torch.channels_last_3d)


def _launch(a, b, weight, norm_out, sum_out, bias) -> None:
    batch, channels, frames, height, width = a.shape
    rows_per_batch = frames * height * width
    rows = batch * rows_per_batch
    # The encoder keeps every activation channels-last; a convolution over a single frame (an image, or deep
    # verify's frame-0 check) can come back in another layout, so such operands are copied into it, and a
    # result written to a tensor of another layout is copied back.
    a, b = _channel_rows(a), _channel_rows(b)
    target = sum_out
    if sum_out is not None and not sum_out.is_contiguous(memory_format=torch.channels_last_3d):
        sum_out = torch.empty_like(sum_out, memory_format=torch.channels_last_3d)
    block_c = triton.next_power_of_2(channels)
    per_program = max(1, 8192 // block_c)
    grid = (triton.cdiv(rows, per_program),)
    _add_rms_silu_rows[grid](
        a,
        b if b is not None else a,
        weight.reshape(-1).float().contiguous() if norm_out is not None else a,  # unread without a norm
        bias.reshape(-1).float().contiguous() if bias is not None else a,  # unread without a bias
        norm_out if norm_out is not None else a,
        sum_out if sum_out is not None else a,
        rows,
        rows_per_batch,
        norm_out.stride(0) if norm_out is not None else 0,
        channels,
        HAS_B=b is not None,
        HAS_BIAS=bias is not None,
        WRITE_NORM=norm_out is not None,
        WRITE_SUM=sum_out is not None,
        BLOCK_C=block_c,
        ROWS=per_program,
    )
    if target is not None and target is not sum_out:
        target.copy_(sum_out)


if triton is not None:

    @triton.jit
    def _add_rms_silu_rows(a_ptr, b_ptr, w_ptr, bias_ptr, norm_ptr, sum_ptr, rows, rows_per_batch,
                           norm_batch_stride, channels, HAS_B: tl.constexpr, HAS_BIAS: tl.constexpr,
                           WRITE_NORM: tl.constexpr, WRITE_SUM: tl.constexpr, BLOCK_C: tl.constexpr,
                           ROWS: tl.constexpr):
        row = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
        col = tl.arange(0, BLOCK_C)[None, :]
        mask = (row < rows) & (col < channels)
        offset = row * channels + col
        total = tl.load(a_ptr + offset, mask=mask, other=0.0).to(tl.float32)
        if HAS_BIAS:
            total += tl.load(bias_ptr + col, mask=col < channels, other=0.0)
        if HAS_B:
            total += tl.load(b_ptr + offset, mask=mask, other=0.0).to(tl.float32)
        total = total.to(a_ptr.dtype.element_ty)
        if WRITE_SUM:
            tl.store(sum_ptr + offset, total, mask=mask)
        if WRITE_NORM:
            x = total.to(tl.float32)
            norm = tl.sqrt(tl.sum(x * x, axis=1))[:, None]
            y = x / tl.maximum(norm, 1e-12) * tl.load(w_ptr + col, mask=col < channels, other=0.0)
            y = y / (1.0 + tl.exp(-y))
            batch = row // rows_per_batch
            out_offset = batch * norm_batch_stride + (row - batch * rows_per_batch) * channels + col
            tl.store(norm_ptr + out_offset, y.to(norm_ptr.dtype.element_ty), mask=mask)
