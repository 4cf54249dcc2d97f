"""Resize geometry: where the output pixels come from in the displayed source (docs/frames.md).

One `ResizePlan` drives every modality of a sample, so RGB, mask and depth pixels stay aligned: RGB is
filtered (swscale or torch), masks and depth are sampled nearest-neighbour on the same grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError

RESIZE_MODES = ("cover_crop", "stretch")


@dataclass(frozen=True)
class ResizePlan:
    """Scale the displayed source to (scaled_w, scaled_h), then keep `crop` of it (out_w x out_h)."""

    scaled_w: int
    scaled_h: int
    crop: tuple[int, int, int, int]  # x0, y0, x1, y1 in scaled pixels (x1, y1 exclusive)
    source_crop: tuple[float, float, float, float]  # the same box in displayed source pixels
    out_w: int
    out_h: int
    src_w: int  # displayed source size (rotation applied)
    src_h: int

    def to_json(self) -> dict[str, object]:
        return {
            "scaled_size": [self.scaled_w, self.scaled_h],
            "crop": list(self.crop),
            "crop_box": [round(v, 6) for v in self.source_crop],
        }


def plan_resize(src_w: int, src_h: int, out_w: int, out_h: int, mode: str) -> ResizePlan:
    """cover_crop: scale by max(out_w/src_w, out_h/src_h) (sizes rounded to nearest, never below the output),
    then centre-crop, extra pixel on the right/bottom; stretch: scale straight to the output size."""
    if src_w < 1 or src_h < 1 or out_w < 1 or out_h < 1:
        raise ConfigError(f"resize {src_w}x{src_h} -> {out_w}x{out_h}: every size must be >= 1")
    if mode == "stretch":
        scaled_w, scaled_h = out_w, out_h
    elif mode == "cover_crop":
        scale = max(out_w / src_w, out_h / src_h)
        scaled_w = max(out_w, int(round(src_w * scale)))
        scaled_h = max(out_h, int(round(src_h * scale)))
    else:
        raise ConfigError(f"frames.resize={mode!r} is not allowed; allowed: {', '.join(RESIZE_MODES)}")
    x0 = (scaled_w - out_w) // 2
    y0 = (scaled_h - out_h) // 2
    crop = (x0, y0, x0 + out_w, y0 + out_h)
    sx, sy = src_w / scaled_w, src_h / scaled_h
    source_crop = (crop[0] * sx, crop[1] * sy, crop[2] * sx, crop[3] * sy)
    return ResizePlan(scaled_w, scaled_h, crop, source_crop, out_w, out_h, src_w, src_h)


def nearest_source_indices(plan: ResizePlan) -> tuple[np.ndarray, np.ndarray]:
    """Source row and column of every output pixel under nearest-neighbour sampling.

    Output pixel centre (x + 0.5) in scaled space maps to source x_s = (x + 0.5) * src_w / scaled_w; the
    source pixel holding that point is floor(x_s). Integer arithmetic keeps it exact.
    """
    xs = np.arange(plan.crop[0], plan.crop[2], dtype=np.int64)
    ys = np.arange(plan.crop[1], plan.crop[3], dtype=np.int64)
    cols = ((2 * xs + 1) * plan.src_w) // (2 * plan.scaled_w)
    rows = ((2 * ys + 1) * plan.src_h) // (2 * plan.scaled_h)
    return rows, cols


def resize_nearest(frames: np.ndarray, plan: ResizePlan) -> np.ndarray:
    """[T, src_h, src_w, ...] -> [T, out_h, out_w, ...] by nearest-neighbour sampling on the plan's grid."""
    rows, cols = nearest_source_indices(plan)
    return np.take(np.take(frames, rows, axis=1), cols, axis=2)  # take: several times faster than [:, rows]
