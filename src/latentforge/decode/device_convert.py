"""`frames.resize_backend: device`, the device's part: YUV 4:2:0 frames (yuv_capture.py) -> the encoder's input.

Each step repeats what the `torch` backend does on the CPU, on whatever device holds the frames:
1. YUV -> full-range RGB at the coded size, rounded to uint8 values: what swscale's rgb24 conversion gives
   (to_rgb24, whose default bicubic filter upsamples the chroma): chroma upsampled with swscale's bicubic
   (Keys, a = -0.6) from its sample positions (co-sited with even luma columns, between luma rows), then the
   frame's matrix and range;
2. rotated upright (as `upright`);
3. resized as `torch_resize` does (antialiased when either axis shrinks), only the pixels the crop keeps,
   rounded, clamped;
4. mapped to [-1, 1] through the pixel table, in the encoder's [3, T, H, W] layout.

Both resamples are gathers with fixed weights along one axis at a time (resample_taps.py). On a CUDA device with
Triton they run as three kernels (device_kernels.py); elsewhere, or where those fail to build, eagerly with torch
(the resize through torch's own interpolate). The two compute the same sums and can differ in the last float bit,
so a rounding tie can fall one level apart.
"""

from __future__ import annotations

import functools
from types import ModuleType

import numpy as np
import torch
import torch.nn.functional as F

from ..devices import copy_to_device
from .resample_taps import chroma_taps, resize_taps
from .yuv_format import YuvFormat

# Luma weights (Kr, Kb) of each matrix (yuv_format.COLOUR_MATRICES); Kg = 1 - Kr - Kb.
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
    """out[..., m, ...] = sum over k of weight[k, m] * values[..., index[k, m], ...] along `dim` (-1 or -2), summed
    in k order."""
    shape = (-1,) if dim == -1 else (-1, 1)
    out = values.index_select(dim, index[0]) * weight[0].view(shape)
    for k in range(1, index.shape[0]):
        out = out + values.index_select(dim, index[k]) * weight[k].view(shape)
    return out


def _full_size_rgb(y: torch.Tensor, u: torch.Tensor, v: torch.Tensor, coefficients: tuple[float, ...],
                   rows: tuple[torch.Tensor, torch.Tensor], columns: tuple[torch.Tensor, torch.Tensor]
                   ) -> torch.Tensor:
    """uint8 Y [T, H, W], U and V [T, H/2, W/2] -> float32 RGB [T, 3, H, W], rounded half-to-even and clamped to
    0..255, with _coefficients."""
    # Horizontal first: the vertical pass then runs over rows of the full width, as swscale's does.
    cb = _gather_sum(_gather_sum(u.float(), -1, *columns), -2, *rows) - 128
    cr = _gather_sum(_gather_sum(v.float(), -1, *columns), -2, *rows) - 128
    luma = y * coefficients[0] + coefficients[1]
    red = luma + cr * coefficients[2]
    green = luma + cb * coefficients[3] + cr * coefficients[4]
    blue = luma + cb * coefficients[5]
    return torch.stack([red, green, blue], 1).round().clamp(0, 255)


@functools.cache
def kernels_for(device: torch.device) -> ModuleType | None:
    """device_kernels where they run on `device` and agree with the eager steps (a CUDA device with Triton; checked
    once here on a small random clip, every step and both layouts), else None: the eager steps."""
    if device.type != "cuda":
        return None
    try:
        from . import device_kernels

        levels = torch.linspace(-1, 1, 256, device=device)
        values = torch.randint(0, 256, (3, 96 * 54 * 3 // 2), generator=torch.Generator().manual_seed(0))
        for layout, rotation in (("i420", 0), ("nv12", 90)):
            fmt = YuvFormat(layout, 96, 54, "bt709", False, rotation, (30, 53), (1, 2, 29, 50), "bicubic")
            ours, eager = (_convert(values.to(torch.uint8).to(device), fmt, levels, k) for k in (device_kernels, None))
            if not torch.allclose(ours, eager, atol=1.01 * 2 / 255, rtol=0):
                return None
    except Exception:  # noqa: BLE001 - no Triton, no C compiler for its launcher, ...: the eager steps
        return None
    return device_kernels


def _on_device(tables, device: torch.device) -> tuple[tuple[torch.Tensor, torch.Tensor], ...]:
    """Sampling tables on `device`, tap-major (index int32 [K, m], weight float32 [K, m]), copied without the host
    waiting for the device."""
    on_device = []
    for index, weight in tables:
        index = torch.from_numpy(np.ascontiguousarray(index.T, np.int32))
        weight = torch.from_numpy(np.ascontiguousarray(weight.T, np.float32))
        on_device.append((copy_to_device(index, device), copy_to_device(weight, device)))
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


def _coefficients(fmt: YuvFormat) -> tuple[float, ...]:
    """The colour step's coefficients for the frame's matrix and range: luma scale, luma offset, then Cr -> R,
    Cb -> G, Cr -> G, Cb -> B (chroma range included)."""
    if fmt.full_range:
        luma_scale, chroma_scale = 1.0, 1.0
    else:
        luma_scale, chroma_scale = 255 / 219, 255 / 224
    kr, kb = LUMA_WEIGHTS[fmt.matrix]
    kg = 1 - kr - kb
    return (luma_scale, 0.0 if fmt.full_range else -16 * luma_scale, 2 * (1 - kr) * chroma_scale,
            -2 * kb * (1 - kb) / kg * chroma_scale, -2 * kr * (1 - kr) / kg * chroma_scale, 2 * (1 - kb) * chroma_scale)


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
    half-to-even, clamped to 0..255), eagerly."""
    chroma = _chroma_tables(fmt.width, fmt.height, values.device)
    return _full_size_rgb(*_planes(values, fmt), _coefficients(fmt), *chroma)


def resize_rgb(rgb: torch.Tensor, fmt: YuvFormat) -> torch.Tensor:
    """float32 [T, 3, H, W] upright uint8 values -> the crop of the resized frames [T, 3, out_h, out_w], rounded and
    clamped: torch_resize's interpolate call, then the crop."""
    scaled_w, scaled_h = fmt.scaled_size
    size = (scaled_h, scaled_w)
    if fmt.resize_filter == "area":
        out = F.interpolate(rgb, size=size, mode="area")
    else:
        shrinks = scaled_w < rgb.shape[-1] or scaled_h < rgb.shape[-2]
        out = F.interpolate(rgb, size=size, mode=fmt.resize_filter, align_corners=False, antialias=shrinks)
    x0, y0, x1, y1 = fmt.crop
    return out[..., y0:y1, x0:x1].round().clamp(0, 255)


def _convert(values: torch.Tensor, fmt: YuvFormat, levels: torch.Tensor, kernels: ModuleType | None) -> torch.Tensor:
    """yuv_to_input with the kernels, or with the eager steps (kernels None), in chunks of frames of equal size."""
    out_w, out_h = fmt.out_size
    frames = values.shape[0]
    output = torch.empty((3, frames, out_h, out_w), dtype=torch.float32, device=values.device)
    chunks = max(1, -(-frames * 4 * 3 * fmt.width * fmt.height // _CHUNK_BYTES))
    for part in torch.arange(frames).tensor_split(chunks):
        start, stop = int(part[0]), int(part[-1]) + 1
        if kernels is not None:
            rgb = kernels.colour(*_planes(values[start:stop], fmt), _coefficients(fmt),
                                 *_chroma_tables(fmt.width, fmt.height, values.device))
        else:
            rgb = yuv_to_rgb(values[start:stop], fmt)
        if fmt.rotation:
            rgb = torch.rot90(rgb, fmt.rotation // 90, dims=(-2, -1))
        if kernels is not None and fmt.resize_filter != "area":
            kernels.resize_into(output[:, start:stop], rgb, *_resize_tables(fmt, values.device), levels)
        else:
            output[:, start:stop] = levels[resize_rgb(rgb, fmt).long()].transpose(0, 1)
    return output


def yuv_to_input(values: torch.Tensor, fmt: YuvFormat, levels: torch.Tensor, kernels: bool = True) -> torch.Tensor:
    """uint8 [T, frame_bytes] YUV frames -> float32 [3, T, out_h, out_w]: each output level through `levels` (the
    256-entry pixel table, on values' device). kernels=False: the eager steps even where the kernels run."""
    return _convert(values, fmt, levels, kernels_for(values.device) if kernels else None)
