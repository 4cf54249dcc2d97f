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
"""

from __future__ import annotations

import math

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
    """Twice as many samples along `dim` (edge samples repeated past the ends): weighted sums of shifted slices,
    elementwise float32 on any device."""
    n = values.shape[dim]
    first, last = values.narrow(dim, 0, 1), values.narrow(dim, n - 1, 1)
    padded = torch.cat([first, first, values, last, last], dim)
    out = [sum(w * padded.narrow(dim, 2 + start + t, n) for t, w in enumerate(weights) if w)
           for start, weights in phases]
    return torch.stack(out, dim + 1).flatten(dim, dim + 1)


def _planes(values: torch.Tensor, fmt: YuvFormat) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """uint8 [T, frame_bytes] -> Y [T, H, W], U and V [T, ceil(H/2), ceil(W/2)], all float32."""
    frames = values.shape[0]
    chroma_w, chroma_h = fmt.chroma_size
    luma = fmt.width * fmt.height
    y = values[:, :luma].reshape(frames, fmt.height, fmt.width)
    if fmt.layout == "nv12":
        uv = values[:, luma:].reshape(frames, chroma_h, chroma_w, 2)
        u, v = uv[..., 0], uv[..., 1]
    else:
        chroma = chroma_w * chroma_h
        u = values[:, luma : luma + chroma].reshape(frames, chroma_h, chroma_w)
        v = values[:, luma + chroma :].reshape(frames, chroma_h, chroma_w)
    return y.float(), u.float(), v.float()


def yuv_to_rgb(values: torch.Tensor, fmt: YuvFormat) -> torch.Tensor:
    """uint8 [T, frame_bytes] -> float32 [T, 3, H, W] full-range RGB at the coded size, uint8 values (rounded
    half-to-even, clamped to 0..255)."""
    y, u, v = _planes(values, fmt)
    # Horizontal first: the vertical pass then runs over rows of the full width, as swscale's does.
    chroma = _upsample(_upsample(torch.stack([u, v], 1), 3, _COLUMNS), 2, _ROWS)
    if fmt.full_range:
        luma, scale = y, 1.0
    else:
        luma, scale = (y - 16) * (255 / 219), 255 / 224
    cb, cr = (chroma[:, 0] - 128) * scale, (chroma[:, 1] - 128) * scale
    kr, kb = LUMA_WEIGHTS[fmt.matrix]
    kg = 1 - kr - kb
    red = luma + 2 * (1 - kr) * cr
    green = luma - (2 * kb * (1 - kb) / kg) * cb - (2 * kr * (1 - kr) / kg) * cr
    blue = luma + 2 * (1 - kb) * cb
    return torch.stack([red, green, blue], 1).round().clamp(0, 255)


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
        rgb = torch.rot90(yuv_to_rgb(values[start : start + chunk], fmt), fmt.rotation // 90, dims=(-2, -1))
        output[start : start + chunk] = resize_rgb(rgb, fmt)[..., y0:y1, x0:x1]
    return output.permute(0, 2, 3, 1)
