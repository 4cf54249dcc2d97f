"""`frames.resize_backend: device`, the device's part: YUV 4:2:0 frames (yuv_capture.py) -> the output RGB frames.

Each step repeats what the `torch` backend does on the CPU, on whatever device holds the frames:
1. YUV -> full-range RGB at the coded size, rounded to uint8 values: what swscale's rgb24 conversion gives
   (to_rgb24, whose default bicubic filter upsamples the chroma): chroma upsampled with swscale's bicubic
   (Keys, a = -0.6) from its sample positions (co-sited with even luma columns, between luma rows), then the
   frame's matrix and range;
2. rotated upright (as `upright`);
3. resized with the weights of the same interpolate call as `torch_resize` (antialiased when either axis shrinks),
   only the pixels the crop keeps, rounded, clamped.

Both resamples (chroma upsampling, resize) are gathers with fixed weights along one axis at a time
(resample_taps.py). On a CUDA device with Triton, each step runs as one compiled kernel (torch.compile with
dynamic shapes) instead of dozens of passes over float32 frames; elsewhere, or where compiling fails, the same
functions run eagerly. Compiled and eager compute the same sums and can differ in the last float bit, so a
rounding tie can fall one level apart.
"""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from ..records import YuvFormat
from .resample_taps import chroma_taps, resize_taps

# Luma weights (Kr, Kb) of each matrix (records.COLOUR_MATRICES); Kg = 1 - Kr - Kb.
LUMA_WEIGHTS = {
    "bt601": (0.299, 0.114),
    "bt709": (0.2126, 0.0722),
    "fcc": (0.30, 0.11),
    "smpte240m": (0.212, 0.087),
    "bt2020": (0.2627, 0.0593),
}
# Frames converted at once: bounds the float32 intermediates to about this many bytes.
_CHUNK_BYTES = 1 << 28


def _gather_sum(values: torch.Tensor, dim: int, index: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """out[..., m, ...] = sum over k of weight[m, k] * values[..., index[m, k], ...] along `dim` (-1 or -2), summed
    in k order."""
    shape = (-1,) if dim == -1 else (-1, 1)
    out = values.index_select(dim, index[:, 0]) * weight[:, 0].view(shape)
    for k in range(1, index.shape[1]):
        out = out + values.index_select(dim, index[:, k]) * weight[:, k].view(shape)
    return out


def _full_size_rgb(y: torch.Tensor, u: torch.Tensor, v: torch.Tensor, coefficients: torch.Tensor,
                   rows: tuple[torch.Tensor, torch.Tensor], columns: tuple[torch.Tensor, torch.Tensor]
                   ) -> torch.Tensor:
    """uint8 Y [T, H, W], U and V [T, H/2, W/2] -> float32 RGB [T, 3, H, W], rounded half-to-even and clamped to
    0..255. coefficients: luma scale, luma offset, then Cr -> R, Cb -> G, Cr -> G, Cb -> B (chroma range included)."""
    # Horizontal first: the vertical pass then runs over rows of the full width, as swscale's does.
    cb = _gather_sum(_gather_sum(u.float(), -1, *columns), -2, *rows) - 128
    cr = _gather_sum(_gather_sum(v.float(), -1, *columns), -2, *rows) - 128
    luma = y * coefficients[0] + coefficients[1]
    red = luma + cr * coefficients[2]
    green = luma + cb * coefficients[3] + cr * coefficients[4]
    blue = luma + cb * coefficients[5]
    return torch.stack([red, green, blue], 1).round().clamp(0, 255)


def _resize_columns(rgb: torch.Tensor, index: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return _gather_sum(rgb, -1, index, weight)


def _resize_rows(rgb: torch.Tensor, index: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return _gather_sum(rgb, -2, index, weight).round().clamp(0, 255)


@functools.cache
def _compiled(step: Callable, device: torch.device) -> Callable | None:
    """`step` compiled for `device`: one kernel for any frame count and size (dynamic shapes). Each step is its own
    function, so each gets its own few graphs (layouts, tap counts) and stays under torch.compile's recompile limit,
    past which calls would run eagerly. None on other devices, without Triton, or where compiling fails (tried
    once on a small input)."""
    if device.type != "cuda":
        return None
    from torch.utils._triton import has_triton  # imports Triton: only for CUDA devices

    if not has_triton():
        return None
    compiled = torch.compile(step, dynamic=True, fullgraph=True)
    try:
        _FIRST_CALLS[step](compiled, device)
    except Exception:  # noqa: BLE001 - any compile failure: the eager functions compute the same
        return None
    return compiled


def _try_colour(step: Callable, device: torch.device) -> None:
    planes = torch.zeros((2, 8, 8), dtype=torch.uint8, device=device)
    step(planes, planes[:, :4, :4], planes[:, :4, :4], torch.zeros(6, device=device), *_chroma_tables(8, 8, device))


def _try_resize(step: Callable, device: torch.device) -> None:
    step(torch.zeros((2, 3, 8, 8), device=device), *_on_device([resize_taps(8, 4, "bilinear", True, 0, 4)], device)[0])


_FIRST_CALLS = {_full_size_rgb: _try_colour, _resize_columns: _try_resize, _resize_rows: _try_resize}


def _on_device(tables, device: torch.device) -> tuple[tuple[torch.Tensor, torch.Tensor], ...]:
    """Sampling tables on `device`, copied from page-locked memory so the host does not wait for the device."""
    on_device = []
    for index, weight in tables:
        index, weight = torch.from_numpy(index), torch.from_numpy(weight).float()
        if device.type == "cuda":
            index, weight = index.pin_memory(), weight.pin_memory()
        on_device.append((index.to(device, non_blocking=True), weight.to(device, non_blocking=True)))
    return tuple(on_device)


@functools.lru_cache(maxsize=64)
def _chroma_tables(width: int, height: int, device: torch.device) -> tuple[tuple[torch.Tensor, torch.Tensor], ...]:
    """(rows, columns) of the chroma upsampling at a coded size."""
    return _on_device([chroma_taps(height, True), chroma_taps(width, False)], device)


@functools.lru_cache(maxsize=64)
def _resize_tables(fmt: YuvFormat, device: torch.device) -> tuple[tuple[torch.Tensor, torch.Tensor], ...]:
    """(columns, rows) of the resize from the upright coded size to the crop of the scaled size."""
    upright_w, upright_h = (fmt.height, fmt.width) if fmt.rotation % 180 else (fmt.width, fmt.height)
    scaled_w, scaled_h = fmt.scaled_size
    x0, y0, x1, y1 = fmt.crop
    antialias = scaled_w < upright_w or scaled_h < upright_h
    return _on_device([resize_taps(upright_w, scaled_w, fmt.resize_filter, antialias, x0, x1),
                       resize_taps(upright_h, scaled_h, fmt.resize_filter, antialias, y0, y1)], device)


def _coefficients(fmt: YuvFormat, device: torch.device) -> torch.Tensor:
    """_full_size_rgb's coefficients for the frame's matrix and range."""
    if fmt.full_range:
        luma_scale, chroma_scale = 1.0, 1.0
    else:
        luma_scale, chroma_scale = 255 / 219, 255 / 224
    kr, kb = LUMA_WEIGHTS[fmt.matrix]
    kg = 1 - kr - kb
    values = [luma_scale, 0.0 if fmt.full_range else -16 * luma_scale, 2 * (1 - kr) * chroma_scale,
              -2 * kb * (1 - kb) / kg * chroma_scale, -2 * kr * (1 - kr) / kg * chroma_scale,
              2 * (1 - kb) * chroma_scale]
    return _device_constant(tuple(values), device)


@functools.lru_cache(maxsize=64)
def _device_constant(values: tuple[float, ...], device: torch.device) -> torch.Tensor:
    table = torch.tensor(np.array(values, np.float32))
    return table.pin_memory().to(device, non_blocking=True) if device.type == "cuda" else table


def _planes(values: torch.Tensor, fmt: YuvFormat) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """uint8 [T, frame_bytes] -> uint8 Y [T, H, W], U and V [T, H/2, W/2] (views)."""
    frames = values.shape[0]
    chroma_w, chroma_h = fmt.chroma_size
    luma = fmt.width * fmt.height
    y = values[:, :luma].reshape(frames, fmt.height, fmt.width)
    if fmt.layout == "nv12":
        uv = values[:, luma:].reshape(frames, chroma_h, chroma_w, 2)
        return y, uv[..., 0], uv[..., 1]
    chroma = chroma_w * chroma_h
    u = values[:, luma : luma + chroma].reshape(frames, chroma_h, chroma_w)
    v = values[:, luma + chroma :].reshape(frames, chroma_h, chroma_w)
    return y, u, v


def yuv_to_rgb(values: torch.Tensor, fmt: YuvFormat) -> torch.Tensor:
    """uint8 [T, frame_bytes] -> float32 [T, 3, H, W] full-range RGB at the coded size, uint8 values (rounded
    half-to-even, clamped to 0..255)."""
    colour = _compiled(_full_size_rgb, values.device) or _full_size_rgb
    return colour(*_planes(values, fmt), _coefficients(fmt, values.device),
                  *_chroma_tables(fmt.width, fmt.height, values.device))


def resize_rgb(rgb: torch.Tensor, fmt: YuvFormat) -> torch.Tensor:
    """float32 [T, 3, H, W] upright uint8 values -> the crop of the resized frames [T, 3, out_h, out_w], rounded and
    clamped, as torch_resize and the crop compute them: compiled, only the kept pixels from interpolate's weights;
    eagerly, torch's interpolate itself."""
    columns_step, rows_step = (_compiled(step, rgb.device) for step in (_resize_columns, _resize_rows))
    if fmt.resize_filter != "area" and columns_step and rows_step:
        columns, rows = _resize_tables(fmt, rgb.device)
        return rows_step(columns_step(rgb, *columns), *rows)
    scaled_w, scaled_h = fmt.scaled_size
    size = (scaled_h, scaled_w)
    if fmt.resize_filter == "area":
        out = F.interpolate(rgb, size=size, mode="area")
    else:
        shrinks = scaled_w < rgb.shape[-1] or scaled_h < rgb.shape[-2]
        out = F.interpolate(rgb, size=size, mode=fmt.resize_filter, align_corners=False, antialias=shrinks)
    x0, y0, x1, y1 = fmt.crop
    return out[..., y0:y1, x0:x1].round().clamp(0, 255)


def yuv_to_output(values: torch.Tensor, fmt: YuvFormat) -> torch.Tensor:
    """uint8 [T, frame_bytes] YUV frames -> uint8 [T, out_h, out_w, 3] output frames, on values' device."""
    out_w, out_h = fmt.out_size
    frames = values.shape[0]
    output = torch.empty((frames, 3, out_h, out_w), dtype=torch.uint8, device=values.device)
    # Chunks of equal size (a size-1 chunk would make the compiled steps specialise for it).
    chunks = -(-frames * 4 * 3 * fmt.width * fmt.height // _CHUNK_BYTES)
    for part in torch.arange(frames).tensor_split(max(1, chunks)):
        start, stop = int(part[0]), int(part[-1]) + 1
        rgb = yuv_to_rgb(values[start:stop], fmt)
        if fmt.rotation:
            rgb = torch.rot90(rgb, fmt.rotation // 90, dims=(-2, -1)).contiguous()
        output[start:stop] = resize_rgb(rgb, fmt)
    return output.permute(0, 2, 3, 1)
