"""Sampling tables for `frames.resize_backend: device`: for each output pixel along one axis, the source pixels it
reads and their weights, so a resample is a fixed number of gathers and multiply-adds (device_convert.py).

- chroma_taps: swscale's bicubic chroma upsampling (Keys, a = -0.6), chroma co-sited with even luma columns and
  between luma rows, edge samples repeated;
- resize_taps: torch's `interpolate` (align_corners=False) for bilinear and bicubic, with and without antialias,
  the same weights its kernels compute (they do it in float32; these are float64 rounded to float32).

Tables are (index int64 [m, K], weight float64 [m, K]); rows with fewer taps are padded with weight 0 at index 0.
K is padded to a power of two so a compiled resample sees few distinct K.
"""

from __future__ import annotations

import math

import numpy as np

# swscale's bicubic: Mitchell-Netravali with B = 0, C = 0.6, i.e. Keys' cubic with a = -0.6.
_SWSCALE_A = -0.6
# torch's interpolate: antialiased bicubic uses a = -0.5, plain bicubic a = -0.75; each filter's reach at scale 1.
_AA_BICUBIC_A = -0.5
_BICUBIC_A = -0.75
_FILTER_SIZE = {"bilinear": 2, "bicubic": 4}

Taps = tuple[np.ndarray, np.ndarray]


def keys(distance: float, a: float) -> float:
    """Keys' cubic convolution kernel with parameter `a`."""
    x = abs(distance)
    if x < 1:
        return ((a + 2) * x - (a + 3)) * x * x + 1
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a if x < 2 else 0.0


def _padded(rows: list[list[tuple[int, float]]]) -> Taps:
    width = max(4, 1 << (max(len(r) for r in rows) - 1).bit_length())
    index = np.zeros((len(rows), width), np.int64)
    weight = np.zeros((len(rows), width), np.float64)
    for m, taps in enumerate(rows):
        for k, (i, w) in enumerate(taps):
            index[m, k], weight[m, k] = i, w
    return index, weight


def chroma_taps(luma_size: int, between_rows: bool) -> Taps:
    """Luma positions 0..luma_size-1 from luma_size // 2 chroma samples: sample k lies on luma position 2k
    (columns) or between luma positions 2k and 2k + 1 (rows)."""
    chroma_size = luma_size // 2
    rows = []
    for position in range(luma_size):
        # The luma position in chroma units, as an offset from chroma sample k = position // 2.
        shift = (-0.25 if position % 2 == 0 else 0.25) if between_rows else 0.5 * (position % 2)
        first = math.floor(shift) - 1
        k = position // 2
        rows.append([(min(max(k + first + t, 0), chroma_size - 1), keys(shift - (first + t), _SWSCALE_A))
                     for t in range(4)])
    return _padded(rows)


def _antialias_row(i: int, size_in: int, scale: float, filter_name: str) -> list[tuple[int, float]]:
    """torch's _compute_weights_span and _compute_weights (upsample antialias kernels)."""
    filter_size = _FILTER_SIZE[filter_name]
    support = filter_size * 0.5 * scale if scale >= 1.0 else filter_size * 0.5
    center = scale * (i + 0.5)
    start = max(int(center - support + 0.5), 0)
    count = min(int(center + support + 0.5), size_in) - start
    invscale = 1.0 / scale if scale >= 1.0 else 1.0
    if filter_name == "bicubic":
        weights = [keys((j + start - center + 0.5) * invscale, _AA_BICUBIC_A) for j in range(count)]
    else:
        weights = [max(0.0, 1 - abs((j + start - center + 0.5) * invscale)) for j in range(count)]
    total = sum(weights)
    return [(start + j, w / total if total != 0 else w) for j, w in enumerate(weights)]


def _plain_row(i: int, size_in: int, scale: float, filter_name: str) -> list[tuple[int, float]]:
    """torch's upsample_bicubic2d / upsample_bilinear2d without antialias: 4 (bicubic, edge-clamped) or 2 taps."""
    if filter_name == "bicubic":
        real = scale * (i + 0.5) - 0.5
        floor = math.floor(real)
        t = real - floor
        weights = (keys(t + 1, _BICUBIC_A), keys(t, _BICUBIC_A), keys(1 - t, _BICUBIC_A), keys(2 - t, _BICUBIC_A))
        return [(min(max(floor - 1 + k, 0), size_in - 1), w) for k, w in enumerate(weights)]
    real = max(scale * (i + 0.5) - 0.5, 0.0)
    low = int(real)
    step = 1 if low < size_in - 1 else 0
    fraction = real - low
    return [(low, 1 - fraction), (low + step, fraction)]


def resize_taps(size_in: int, size_out: int, filter_name: str, antialias: bool, start: int, stop: int) -> Taps:
    """Outputs start..stop-1 of torch's interpolate from size_in to size_out samples along one axis."""
    scale = size_in / size_out
    row = _antialias_row if antialias else _plain_row
    return _padded([row(i, size_in, scale, filter_name) for i in range(start, stop)])
