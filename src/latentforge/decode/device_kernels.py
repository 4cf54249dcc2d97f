"""Triton kernels of `frames.resize_backend: device` on CUDA: the same sums as device_convert.py's eager steps, one
pass each instead of dozens (imported only where Triton is installed).

- colour: YUV 4:2:0 planes -> float32 RGB [T, 3, H, W] at the coded size, rounded and clamped (chroma upsampled
  with the chroma tables, columns then rows, then the matrix);
- resize_into: the resize tables along columns, then along rows, rounded, clamped and mapped through the pixel
  table into the encoder's input layout [3, T, out_h, out_w].

Each output sums its taps in table order, as the eager steps do; the compiler may fuse a multiply and an add, so a
value can differ from the eager one in the last bit (and a rounding tie then falls one level apart).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

_BLOCK = 256
# 1.5 * 2**23: adding it puts any |x| < 2**22 where float32's spacing is 1, so the addition itself rounds x to an
# integer, half-to-even (IEEE's rounding); subtracting it again is exact.
_ROUNDER = tl.constexpr(12582912.0)

Table = tuple[torch.Tensor, torch.Tensor]  # index int32 [K, m], weight float32 [K, m] (tap-major: coalesced loads)


@triton.jit
def _level(value):
    """Round half-to-even and clamp to 0..255, as torch's round().clamp(0, 255) (values here stay far below 2**22)."""
    return tl.minimum(tl.maximum((value + _ROUNDER) - _ROUNDER, 0.0), 255.0)


@triton.jit
def _colour_kernel(y_ptr, u_ptr, v_ptr, out_ptr, row_index, row_weight, column_index, column_weight,
                   height, width, y_frame, y_row, c_frame, c_row, c_column,
                   luma_scale, luma_offset, cr_red, cb_green, cr_green, cb_blue, BLOCK: tl.constexpr):
    column = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    row = tl.program_id(1).to(tl.int64)
    frame = tl.program_id(2).to(tl.int64)
    inside = column < width
    cb = tl.zeros([BLOCK], tl.float32)
    cr = tl.zeros([BLOCK], tl.float32)
    for i in tl.static_range(4):
        chroma_row = tl.load(row_index + i * height + row).to(tl.int64)
        weight = tl.load(row_weight + i * height + row)
        base = frame * c_frame + chroma_row * c_row
        u_sum = tl.zeros([BLOCK], tl.float32)
        v_sum = tl.zeros([BLOCK], tl.float32)
        for j in tl.static_range(4):
            chroma_column = tl.load(column_index + j * width + column, mask=inside, other=0).to(tl.int64)
            tap = tl.load(column_weight + j * width + column, mask=inside, other=0.0)
            offset = base + chroma_column * c_column
            u_sum += tl.load(u_ptr + offset, mask=inside, other=0).to(tl.float32) * tap
            v_sum += tl.load(v_ptr + offset, mask=inside, other=0).to(tl.float32) * tap
        cb += u_sum * weight
        cr += v_sum * weight
    cb = cb - 128.0
    cr = cr - 128.0
    luma = tl.load(y_ptr + frame * y_frame + row * y_row + column, mask=inside, other=0).to(tl.float32)
    luma = luma * luma_scale + luma_offset
    plane = height * width
    out = out_ptr + frame * 3 * plane + row * width + column
    tl.store(out, _level(luma + cr * cr_red), mask=inside)
    tl.store(out + plane, _level(luma + cb * cb_green + cr * cr_green), mask=inside)
    tl.store(out + 2 * plane, _level(luma + cb * cb_blue), mask=inside)


@triton.jit
def _columns_kernel(in_ptr, out_ptr, index, weight, in_width, out_width, TAPS: tl.constexpr, BLOCK: tl.constexpr):
    line = tl.program_id(0).to(tl.int64)
    column = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    inside = column < out_width
    total = tl.zeros([BLOCK], tl.float32)
    for k in tl.static_range(TAPS):
        source = tl.load(index + k * out_width + column, mask=inside, other=0).to(tl.int64)
        tap = tl.load(weight + k * out_width + column, mask=inside, other=0.0)
        total += tl.load(in_ptr + line * in_width + source, mask=inside, other=0.0) * tap
    tl.store(out_ptr + line * out_width + column, total, mask=inside)


@triton.jit
def _rows_kernel(in_ptr, out_ptr, index, weight, levels, in_height, out_height, width, out_frames,
                 TAPS: tl.constexpr, BLOCK: tl.constexpr):
    program = tl.program_id(0).to(tl.int64)
    plane = program // out_height  # frame * 3 + channel
    row = program % out_height
    column = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    inside = column < width
    total = tl.zeros([BLOCK], tl.float32)
    for k in tl.static_range(TAPS):
        source = tl.load(index + k * out_height + row).to(tl.int64)
        tap = tl.load(weight + k * out_height + row)
        total += tl.load(in_ptr + (plane * in_height + source) * width + column, mask=inside, other=0.0) * tap
    value = tl.load(levels + _level(total).to(tl.int32), mask=inside, other=0.0)
    frame, channel = plane // 3, plane % 3
    tl.store(out_ptr + ((channel * out_frames + frame) * out_height + row) * width + column, value, mask=inside)


def colour(y: torch.Tensor, u: torch.Tensor, v: torch.Tensor, coefficients: tuple[float, ...], rows: Table,
           columns: Table) -> torch.Tensor:
    """uint8 Y [T, H, W] (rows contiguous), U and V [T, H/2, W/2] (same strides) -> float32 [T, 3, H, W]."""
    frames, height, width = y.shape
    if y.stride(2) != 1 or u.stride() != v.stride():
        raise ValueError(f"unexpected plane strides: Y {y.stride()}, U {u.stride()}, V {v.stride()}")
    out = torch.empty((frames, 3, height, width), dtype=torch.float32, device=y.device)
    grid = (triton.cdiv(width, _BLOCK), height, frames)
    _colour_kernel[grid](y, u, v, out, *rows, *columns, height, width, y.stride(0), y.stride(1),
                         u.stride(0), u.stride(1), u.stride(2), *coefficients, BLOCK=_BLOCK)
    return out


def resize_into(out: torch.Tensor, rgb: torch.Tensor, columns: Table, rows: Table, levels: torch.Tensor) -> None:
    """float32 RGB levels [T, 3, H, W] -> levels[rounded resize] into `out`, a [3, T, out_h, out_w] slice along T
    of a contiguous [3, T_all, out_h, out_w] tensor."""
    frames, _, height, width = rgb.shape
    out_w, out_h = columns[0].shape[1], rows[0].shape[1]
    rgb = rgb.contiguous()
    across = torch.empty((frames, 3, height, out_w), dtype=torch.float32, device=rgb.device)
    _columns_kernel[(frames * 3 * height, triton.cdiv(out_w, _BLOCK))](
        rgb, across, *columns, width, out_w, TAPS=columns[0].shape[0], BLOCK=_BLOCK)
    out_frames = out.stride(0) // (out_h * out_w)
    _rows_kernel[(frames * 3 * out_h, triton.cdiv(out_w, _BLOCK))](
        across, out, *rows, levels, height, out_h, out_w, out_frames, TAPS=rows[0].shape[0], BLOCK=_BLOCK)
