"""Fused elementwise kernels of the fast Wan2.1 encoder: residual add + RMS norm + SiLU in one pass.

Tensors are channels-last 3D ([B,C,T,H,W] stored as B,T,H,W,C), so every spatio-temporal position is a row of
C contiguous channels. One Triton program normalises a block of rows: it reads the conv output (and the
residual shortcut), writes their bf16 sum when the next block needs it as its own shortcut, and writes
silu(normalize(sum) * weight) into the (time-offset) buffer the next causal conv reads. On the CPU, or without
Triton, the same maths runs eagerly. Rounding follows the reference: the sum is rounded to the compute dtype
first, the norm is computed from that rounded sum in fp32 and rounded once.
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class Tiling:
    """How one Triton program covers its rows: `rows` rows of `parts` x `block_c` channels, with `warps` warps.

    parts > 1 splits the channels into equal power-of-two blocks (96 = 3 x 32, 160 = 5 x 32), so no lane is
    masked off; the sum of squares then adds the blocks in order and the second pass re-reads its operands (from
    cache). parts 1 pads the channels to a power of two and masks the rest."""

    parts: int
    block_c: int
    rows: int
    warps: int


def tiling(channels: int, writes_sum: bool, writes_norm: bool) -> Tiling:
    """The fixed rule that picks the tiling from the channel count and the pass (no timing, so the same bits
    everywhere). Measured on an H200 at the encoder's shapes (bench/kernels/fused_norm.py, fraction of the copy rate):

    - A norm that writes no sum (a conv output and its bias in, the next conv's input out) wants equal channel
      blocks (96 = 3 x 32, 192 = 3 x 64, 384 = 3 x 128; Wan2.2's 160, 320, 640 = 5 blocks): with the channels
      padded to a power of two a quarter of the lanes idled in its reduction (96: 0.36 -> 0.77-0.80).
    - The residual sum and its norm (four tensors) stays bandwidth-bound with the channels padded and masked
      (0.90-0.97), where blocks, which re-read their operands for the second pass, ran at ~0.7.
    - A sum without a norm (no second pass) takes blocks from 192 channels on (192: 0.87 -> 0.98, 384: 0.82 ->
      0.95) and is at the copy rate padded at 96.
    - 8 warps help from 192 channels on, but for the 192-channel norm alone (0.67 -> 0.72 at 16 rows, 4 warps)."""
    padded = 1 << (channels - 1).bit_length()
    block_c = min(channels & -channels, 128)  # the largest power of two dividing it, at most 128
    parts = channels // block_c
    if 16 <= block_c and 1 < parts <= 8 and not (writes_norm and writes_sum) and (writes_norm or channels > 128):
        if channels <= 96:
            return Tiling(parts, block_c, 64, 4)
        if channels <= 192:
            return Tiling(parts, block_c, 16, 4)
        return Tiling(parts, block_c, 16 if writes_norm else 32, 8)
    if writes_norm and padded <= 128:
        return Tiling(1, padded, 64, 4)
    return Tiling(1, padded, 32, 8)


def _channel_rows(tensor: torch.Tensor | None) -> torch.Tensor | None:
    """The tensor with each voxel's channels contiguous (channels-last 3D): itself, or a copy in that layout."""
    if tensor is None or tensor.is_contiguous(memory_format=torch.channels_last_3d):
        return tensor
    return tensor.contiguous(memory_format=torch.channels_last_3d)


def _strided_rows(tensor: torch.Tensor) -> bool:
    """Whether the kernel can write this [B,C,T,H,W] tensor in place: channels contiguous, rows at any stride
    (the interior of a frame-padded buffer)."""
    return tensor.stride(1) == 1


def _launch(a, b, weight, norm_out, sum_out, bias, layout: Tiling | None = None) -> None:
    batch, channels, frames, height, width = a.shape
    rows_per_batch = frames * height * width
    rows = batch * rows_per_batch
    # The encoder keeps every activation channels-last; a convolution over a single frame (an image, or deep
    # verify's frame-0 check) can come back in another layout, so such operands are copied into it, and a
    # result written to a tensor of another layout is copied back. A sum written into the interior of a padded
    # buffer (rows at their own strides, channels contiguous) is written in place.
    a, b = _channel_rows(a), _channel_rows(b)
    target = sum_out
    strided_sum = sum_out is not None and not sum_out.is_contiguous(memory_format=torch.channels_last_3d)
    if strided_sum and not _strided_rows(sum_out):
        sum_out, strided_sum = torch.empty_like(sum_out, memory_format=torch.channels_last_3d), False
    layout = layout or tiling(channels, sum_out is not None, norm_out is not None)
    sum_strides = [sum_out.stride(i) for i in (0, 2, 3, 4)] if strided_sum else [0, 0, 0, 0]
    grid = (triton.cdiv(rows, layout.rows),)
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
        frames,
        height,
        width,
        *sum_strides,
        HAS_B=b is not None,
        HAS_BIAS=bias is not None,
        WRITE_NORM=norm_out is not None,
        WRITE_SUM=sum_out is not None,
        STRIDED_SUM=strided_sum,
        PARTS=layout.parts,
        BLOCK_C=layout.block_c,
        ROWS=layout.rows,
        num_warps=layout.warps,
    )
    if target is not None and target is not sum_out:
        target.copy_(sum_out)


if triton is not None:

    @triton.jit
    def _rounded_sum(a_ptr, b_ptr, bias_ptr, offset, col, mask, channels, HAS_B: tl.constexpr,
                     HAS_BIAS: tl.constexpr):
        """round(a + bias + b) of one block: fp32 adds in that order, rounded to a's dtype."""
        total = tl.load(a_ptr + offset, mask=mask, other=0.0).to(tl.float32)
        if HAS_BIAS:
            total += tl.load(bias_ptr + col, mask=col < channels, other=0.0)
        if HAS_B:
            total += tl.load(b_ptr + offset, mask=mask, other=0.0).to(tl.float32)
        return total.to(a_ptr.dtype.element_ty)

    @triton.jit
    def _add_rms_silu_rows(a_ptr, b_ptr, w_ptr, bias_ptr, norm_ptr, sum_ptr, rows, rows_per_batch,
                           norm_batch_stride, channels, frames, height, width, sum_stride_b, sum_stride_t,
                           sum_stride_h, sum_stride_w, HAS_B: tl.constexpr, HAS_BIAS: tl.constexpr,
                           WRITE_NORM: tl.constexpr, WRITE_SUM: tl.constexpr, STRIDED_SUM: tl.constexpr,
                           PARTS: tl.constexpr, BLOCK_C: tl.constexpr, ROWS: tl.constexpr):
        row = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
        row_ok = row < rows
        if STRIDED_SUM:  # the row's (sample, frame, y, x) at the sum's own strides
            x = row % width
            y = (row // width) % height
            t = (row // (width * height)) % frames
            sample = row // (width * height * frames)
            sum_row = sample * sum_stride_b + t * sum_stride_t + y * sum_stride_h + x * sum_stride_w
        else:
            sum_row = row * channels
        batch = row // rows_per_batch
        norm_row = batch * norm_batch_stride + (row - batch * rows_per_batch) * channels
        squares = tl.zeros([ROWS, 1], dtype=tl.float32)
        for part in tl.static_range(PARTS):
            col = part * BLOCK_C + tl.arange(0, BLOCK_C)[None, :]
            mask = row_ok & (col < channels)
            total = _rounded_sum(a_ptr, b_ptr, bias_ptr, row * channels + col, col, mask, channels, HAS_B, HAS_BIAS)
            if WRITE_SUM:
                tl.store(sum_ptr + sum_row + col, total, mask=mask)
            if WRITE_NORM:
                x32 = total.to(tl.float32)
                squares += tl.sum(x32 * x32, axis=1)[:, None]
                if PARTS == 1:  # the whole row is in registers: normalise it now
                    y32 = x32 / tl.maximum(tl.sqrt(squares), 1e-12) * tl.load(w_ptr + col, mask=col < channels,
                                                                                other=0.0)
                    y32 = y32 / (1.0 + tl.exp(-y32))
                    tl.store(norm_ptr + norm_row + col, y32.to(norm_ptr.dtype.element_ty), mask=mask)
        if WRITE_NORM and PARTS > 1:  # a second pass over the blocks, re-read from cache
            norm = tl.maximum(tl.sqrt(squares), 1e-12)
            for part in tl.static_range(PARTS):
                col = part * BLOCK_C + tl.arange(0, BLOCK_C)[None, :]
                mask = row_ok & (col < channels)
                total = _rounded_sum(a_ptr, b_ptr, bias_ptr, row * channels + col, col, mask, channels, HAS_B,
                                     HAS_BIAS)
                y32 = total.to(tl.float32) / norm * tl.load(w_ptr + col)
                y32 = y32 / (1.0 + tl.exp(-y32))
                tl.store(norm_ptr + norm_row + col, y32.to(norm_ptr.dtype.element_ty), mask=mask)
