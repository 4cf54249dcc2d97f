"""Resize geometry: where the output pixels come from in the displayed source (docs/frames.md).

The plan is made in display geometry (the sample aspect ratio and the rotation applied), so output pixels are
square; the stored frame, rotated upright, is then resized as a whole to the scaled size, which stretches it by
its sample aspect ratio. One `ResizeGeometry` drives every modality of a sample, so RGB, mask and depth pixels stay
aligned: RGB is filtered (swscale or torch), masks and depth are sampled nearest-neighbour on the same grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError

RESIZE_MODES = ("cover_crop", "stretch")


@dataclass(frozen=True, slots=True)
class ResizeGeometry:
    """Scale the displayed source to (scaled_w, scaled_h), then keep `crop` of it (out_w x out_h)."""

    scaled_w: int
    scaled_h: int
    crop: tuple[int, int, int, int]  # x0, y0, x1, y1 in scaled pixels (x1, y1 exclusive)
    source_crop: tuple[float, float, float, float]  # the same box in stored source pixels, rotation applied
    out_w: int
    out_h: int
    stored_w: int  # stored source size, rotation applied: what a decoded frame turned upright measures
    stored_h: int

    def to_json(self) -> dict[str, object]:
        return {
            "scaled_size": [self.scaled_w, self.scaled_h],
            "crop": list(self.crop),
            "crop_box": [round(v, 6) for v in self.source_crop],
        }


def plan_resize(src_w: int, src_h: int, out_w: int, out_h: int, mode: str,
                stored: tuple[int, int] | None = None) -> ResizeGeometry:
    """cover_crop: scale by max(out_w/src_w, out_h/src_h) (sizes rounded to nearest, never below the output),
    then centre-crop, extra pixel on the right/bottom; stretch: scale straight to the output size.
    src_w x src_h is the displayed size; `stored` the stored size turned upright (default: the displayed size,
    square pixels), in whose pixels source_crop is given."""
    stored_w, stored_h = stored if stored is not None else (src_w, src_h)
    if src_w < 1 or src_h < 1 or out_w < 1 or out_h < 1 or stored_w < 1 or stored_h < 1:
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
    sx, sy = stored_w / scaled_w, stored_h / scaled_h
    source_crop = (crop[0] * sx, crop[1] * sy, crop[2] * sx, crop[3] * sy)
    return ResizeGeometry(scaled_w, scaled_h, crop, source_crop, out_w, out_h, stored_w, stored_h)


def nearest_source_indices(plan: ResizeGeometry) -> tuple[np.ndarray, np.ndarray]:
    """Source row and column of every output pixel under nearest-neighbour sampling.

    Output pixel centre (x + 0.5) in scaled space maps to stored source x_s = (x + 0.5) * stored_w / scaled_w;
    the source pixel holding that point is floor(x_s). Integer arithmetic keeps it exact.
    """
    xs = np.arange(plan.crop[0], plan.crop[2], dtype=np.int64)
    ys = np.arange(plan.crop[1], plan.crop[3], dtype=np.int64)
    cols = ((2 * xs + 1) * plan.stored_w) // (2 * plan.scaled_w)
    rows = ((2 * ys + 1) * plan.stored_h) // (2 * plan.scaled_h)
    return rows, cols


class NearestClip:
    """A clip's [T, out_h, out_w, ...] frames sampled nearest-neighbour on the plan's grid, filled one source
    frame at a time: each frame stays in cache between the row and column passes (and for the caller's own
    work on it), and the full-resolution clip never exists as one array."""

    def __init__(self, plan: ResizeGeometry, indices: list[int]) -> None:
        self.rows, self.cols = nearest_source_indices(plan)
        self.length = len(indices)
        self.positions: dict[int, list[int]] = {}  # source frame -> the clip's frames that show it
        for t, index in enumerate(indices):
            self.positions.setdefault(index, []).append(t)
        self.values: np.ndarray | None = None  # allocated with the first frame's dtype and trailing axes

    def add(self, index: int, frame: np.ndarray) -> np.ndarray:
        """Sample source frame `index` ([stored_h, stored_w, ...]) into every clip frame that shows it; returns the
        sampled frame (a view of `values`)."""
        if self.values is None:
            shape = (self.length, self.rows.size, self.cols.size, *frame.shape[2:])
            self.values = np.empty(shape, frame.dtype)
        first, *repeats = self.positions[index]
        # take: several times faster than fancy indexing; rows first, so the column pass reads fewer bytes.
        # mode="clip" never clips (the plan's indices lie inside the source) but lets take write straight
        # into `out`, which mode="raise" stages through a copy.
        rows = np.take(frame, self.rows, axis=0, mode="clip")
        np.take(rows, self.cols, axis=1, out=self.values[first], mode="clip")
        for t in repeats:
            self.values[t] = self.values[first]
        return self.values[first]
