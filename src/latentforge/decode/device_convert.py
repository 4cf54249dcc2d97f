"""`frames.resize_backend: device`, the device's part: YUV 4:2:0 frames (yuv_capture.py) -> the output RGB frames.

Each step repeats what the `torch` backend does on the CPU, on whatever device holds the frames:
1. YUV -> full-range RGB at the coded size, rounded to uint8 values: what swscale's rgb24 conversion gives
   (to_rgb24, whose default bicubic filter upsamples the chroma): chroma upsampled with swscale's bicubic
   (Keys, a = -0.6) from its sample positions (co-sited with even luma columns, between luma rows), then the
   frame's matrix and range;
2. rotated upright (as `upright`);
3. resized with the same interpolate call as `torch_resize` (antialiased when either axis shrinks), rounded,
   clamped;
4. cropped to the plan's box.

Step 1 is linear up to its rounding, so the matrix, the range and the chroma offset are applied to the
quarter-size chroma planes first: what is left at full size is one sum per channel of the scaled luma and an
upsampled chroma term. On a CUDA device with Triton that full-size part runs as one compiled kernel
(torch.compile), instead of some thirty passes over float32 frames; elsewhere it runs eagerly. Both compute
the same sums; they can differ in the last float bit, so a rounding tie can fall one level apart.
"""

from __future__ import annotations

import functools
import math
from typing import Callable

import torch
import torch.nn.functional as F

from ..records import YuvFormat

# Luma weights (Kr, Kb) of each matrix (records.COLOUR_MATRICES); Kg = 1 - Kr - Kb.
LUMA_WEIGHTS = {
    "bt601": (0.299, 0.114),
    "bt709": (0.2126, 0.0722),
    "fcc": (0.30, 0.11),
    "smpte240m": (0.212, 0.087),
    "bt2020": (0.2627, 0.0593),
}
# swscale's bicubic: Mitchell-Netravali with B = 0, C = 0.6, i.e. Keys' cubic with a = -0.6.
_KEYS_A = -0.6
# Frames converted at once: bounds the float32 intermediates to about this many bytes.
_CHUNK_BYTES = 1 << 28


def _keys(distance: float) -> float:
    x, a = abs(distance), _KEYS_A
    if x <= 1:
        return ((a + 2) * x - (a + 3)) * x * x + 1
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a if x < 2 else 0.0


def _phase(shift: float) -> tuple[int, tuple[float, ...]]:
    """The taps of a luma sample at chroma position k + shift: (first tap's offset from k, its 4 weights)."""
    first = math.floor(shift) - 1
    return first, tuple(_keys(shift - (first + t)) for t in range(4))


# Luma samples 2k and 2k + 1 in chroma positions: chroma sample k lies on luma column 2k (horizontal) and between
# luma rows 2k and 2k + 1 (vertical).
_COLUMNS = (_phase(0.0), _phase(0.5))
_ROWS = (_phase(-0.25), _phase(0.25))


def _upsample(values: torch.Tensor, dim: int, phases: tuple[tuple[int, tuple[float, ...]], ...]) -> torch.Tensor:
    """Twice as many samples along `dim` (edge samples repeated past the ends): weighted sums of shifted slices."""
    n = values.shape[dim]
    first, last = values.narrow(dim, 0, 1), values.narrow(dim, n - 1, 1)
    padded = torch.cat([first, first, values, last, last], dim)
    out = [sum(w * padded.narrow(dim, 2 + start + t, n) for t, w in enumerate(weights) if w)
           for start, weights in phases]
    return torch.stack(out, dim + 1).flatten(dim, dim + 1)


def _full_size_rgb(luma: torch.Tensor, terms: torch.Tensor, luma_scale: float) -> torch.Tensor:
    """uint8 luma [T, H, W] and float32 chroma terms [T, 3, H/2, W/2] -> float32 [T, 3, H, W]: each channel is
    luma * luma_scale + its upsampled term, rounded half-to-even and clamped to 0..255."""
    # Horizontal first: the vertical pass then runs over rows of the full width, as swscale's does.
    chroma = _upsample(_upsample(terms, 3, _COLUMNS), 2, _ROWS)
    return (luma.unsqueeze(1) * luma_scale + chroma).round().clamp(0, 255)


@functools.cache
def _cuda_full_size_rgb(device: torch.device) -> Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor]:
    """_full_size_rgb compiled for `device` into one kernel for any frame count and size (dynamic shapes, one graph
    per luma scale, so a build never reaches torch.compile's recompile limit, past which calls would run eagerly);
    the eager function where Triton is missing or the compiled one fails on a first small call (e.g. no C
    compiler for Triton's launcher)."""
    from torch.utils._triton import has_triton  # imports Triton: only for CUDA devices

    if not has_triton():
        return _full_size_rgb
    compiled = torch.compile(_full_size_rgb, dynamic=True, fullgraph=True)
    try:
        luma, terms = torch.zeros((2, 8, 8), dtype=torch.uint8, device=device), torch.zeros((2, 3, 4, 4), device=device)
        compiled(luma, terms, 1.0)
    except Exception:  # noqa: BLE001 - any compile failure: the eager function computes the same sums
        return _full_size_rgb
    return compiled


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


def _chroma_terms(u: torch.Tensor, v: torch.Tensor, fmt: YuvFormat) -> tuple[torch.Tensor, float]:
    """(float32 [T, 3, H/2, W/2]: what the chroma and the luma offset add to R, G and B; the luma scale)."""
    if fmt.full_range:
        luma_scale, luma_offset, chroma_scale = 1.0, 0.0, 1.0
    else:
        luma_scale, chroma_scale = 255 / 219, 255 / 224
        luma_offset = -16 * luma_scale
    kr, kb = LUMA_WEIGHTS[fmt.matrix]
    kg = 1 - kr - kb
    cb, cr = (u.float() - 128) * chroma_scale, (v.float() - 128) * chroma_scale
    red = cr * (2 * (1 - kr)) + luma_offset
    green = cb * -(2 * kb * (1 - kb) / kg) + cr * -(2 * kr * (1 - kr) / kg) + luma_offset
    blue = cb * (2 * (1 - kb)) + luma_offset
    return torch.stack([red, green, blue], 1), luma_scale


def yuv_to_rgb(values: torch.Tensor, fmt: YuvFormat) -> torch.Tensor:
    """uint8 [T, frame_bytes] -> float32 [T, 3, H, W] full-range RGB at the coded size, uint8 values (rounded
    half-to-even, clamped to 0..255)."""
    y, u, v = _planes(values, fmt)
    terms, luma_scale = _chroma_terms(u, v, fmt)
    full_size_rgb = _cuda_full_size_rgb(values.device) if values.device.type == "cuda" else _full_size_rgb
    return full_size_rgb(y, terms, luma_scale)


def resize_rgb(rgb: torch.Tensor, fmt: YuvFormat) -> torch.Tensor:
    """float32 [T, 3, H, W] upright uint8 values -> [T, 3, scaled_h, scaled_w], as torch_resize does."""
    scaled_w, scaled_h = fmt.scaled_size
    size = (scaled_h, scaled_w)
    if fmt.resize_filter == "area":
        out = F.interpolate(rgb, size=size, mode="area")
    else:
        shrinks = scaled_w < rgb.shape[-1] or scaled_h < rgb.shape[-2]
        out = F.interpolate(rgb, size=size, mode=fmt.resize_filter, align_corners=False, antialias=shrinks)
    return out.round().clamp(0, 255)


def yuv_to_output(values: torch.Tensor, fmt: YuvFormat) -> torch.Tensor:
    """uint8 [T, frame_bytes] YUV frames -> uint8 [T, out_h, out_w, 3] output frames, on values' device."""
    out_w, out_h = fmt.out_size
    x0, y0, x1, y1 = fmt.crop
    output = torch.empty((values.shape[0], 3, out_h, out_w), dtype=torch.uint8, device=values.device)
    chunk = max(1, _CHUNK_BYTES // (4 * 3 * fmt.width * fmt.height))
    for start in range(0, values.shape[0], chunk):
        rgb = yuv_to_rgb(values[start : start + chunk], fmt)
        if fmt.rotation:
            rgb = torch.rot90(rgb, fmt.rotation // 90, dims=(-2, -1))
        output[start : start + chunk] = resize_rgb(rgb, fmt)[..., y0:y1, x0:x1]
    return output.permute(0, 2, 3, 1)
