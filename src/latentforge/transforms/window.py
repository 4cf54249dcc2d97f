"""Which source frames a sample uses (docs/frames.md).

Frames are numbered in presentation order (sorted pts). At the source rate a window is `num_frames`
consecutive frames. At a target fps, output frame k shows the time t_k = pts[start] + k / fps, and is the
last source frame whose pts <= t_k + PTS_EPSILON (what a player shows at t_k). A start is valid when the
clip reaches its last time: t_{num_frames-1} <= pts[-1] + PTS_EPSILON.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from ..config import FramesConfig, target_fps
from ..errors import SampleRejected
from ..packed_numbers import PackedFloats, PackedInts
from ..records import VideoInfo

# Absorbs float rounding of timestamps such as 1/30 s; far below any real frame interval.
PTS_EPSILON = 1e-6


@dataclass(frozen=True, slots=True)
class FrameWindow:
    # packed: a build holds every planned window until its commit
    indices: Sequence[int]  # source frame indices in presentation order, one per output frame
    timestamps: Sequence[float]  # their presentation times in seconds

    def __post_init__(self) -> None:
        if not isinstance(self.indices, PackedInts):
            object.__setattr__(self, "indices", PackedInts(self.indices))
        if not isinstance(self.timestamps, PackedFloats):
            object.__setattr__(self, "timestamps", PackedFloats(self.timestamps))

    @property
    def start_frame(self) -> int:
        return self.indices[0]


def window_starts(info: VideoInfo, frames_cfg: FramesConfig) -> list[int]:
    """Every start frame from which a full window can be cut, ascending."""
    n, pts = frames_cfg.num_frames, info.pts
    fps = target_fps(frames_cfg)
    if fps is None:
        return list(range(max(0, len(pts) - n + 1)))
    span = (n - 1) / fps
    # pts are sorted, so the valid starts are a prefix.
    return [s for s in range(len(pts)) if pts[s] + span <= pts[-1] + PTS_EPSILON]


def window_indices(info: VideoInfo, frames_cfg: FramesConfig, start: int) -> tuple[int, ...]:
    """The source frame of every output frame for a window starting at `start` (which must be valid)."""
    n = frames_cfg.num_frames
    fps = target_fps(frames_cfg)
    if fps is None:
        return tuple(range(start, start + n))
    t0 = info.pts[start]
    return tuple(bisect.bisect_right(info.pts, t0 + k / fps + PTS_EPSILON) - 1 for k in range(n))


def seeded_choice(sample_id: str, count: int) -> int:
    """A position in [0, count) fixed by the sample id alone: sha256(utf-8 id), first 8 bytes big-endian,
    modulo count. Identical on every machine and run."""
    digest = hashlib.sha256(sample_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count


def select_window(
    info: VideoInfo, frames_cfg: FramesConfig, sample_id: str, start_frame: int | None
) -> FrameWindow:
    """The sample's window: `start_frame` when fixed by the plan, else by frames_cfg.window:
    start = first valid start, center = starts[(len - 1) // 2], random = starts[seeded_choice(id)]."""
    starts = window_starts(info, frames_cfg)
    if not starts:
        raise SampleRejected("too_short", sample_id, _shortfall(info, frames_cfg))
    if start_frame is not None:
        if start_frame not in range(starts[0], starts[-1] + 1):
            raise SampleRejected(
                "too_short",
                sample_id,
                f"start frame {start_frame} leaves too few frames; valid starts are {starts[0]}..{starts[-1]} "
                f"({_shortfall(info, frames_cfg)})",
            )
        start = start_frame
    elif frames_cfg.window == "start":
        start = starts[0]
    elif frames_cfg.window == "center":
        start = starts[(len(starts) - 1) // 2]
    else:
        start = starts[seeded_choice(sample_id, len(starts))]
    indices = window_indices(info, frames_cfg, start)
    return FrameWindow(indices=indices, timestamps=tuple(info.pts[i] for i in indices))


def window_size(info: VideoInfo, indices: tuple[int, ...], sample_id: str, path: str) -> tuple[int, int]:
    """The decoded (coded) size of the window's frames. A window across a mid-stream change of the frame size is
    rejected (resolution_change): a frame of one size resized by a plan made for the other would be stretched."""
    sizes = info.coded_sizes(indices)
    if len(sizes) == 1:
        return sizes[0]
    changed = next(i for i in indices if info.coded_size(i) != sizes[0])
    (w0, h0), (w1, h1) = sizes[:2]
    raise SampleRejected(
        "resolution_change", sample_id,
        f"{path}: the window's frames {indices[0]}..{indices[-1]} change size mid-stream, from {w0}x{h0} to "
        f"{w1}x{h1} at frame {changed}; choose a window within one size (frames.window, frames.windows) or "
        "re-encode the video at one size")


def _shortfall(info: VideoInfo, frames_cfg: FramesConfig) -> str:
    n = frames_cfg.num_frames
    fps = target_fps(frames_cfg)
    have = f"the video has {info.num_frames} frames"
    if info.num_frames:
        have += f" spanning {info.pts[-1] - info.pts[0]:.3f} s"
    if fps is None:
        return f"needs {n} consecutive frames, {have}; lower frames.num_frames or drop the clip"
    return (
        f"needs {n} frames at {fps:g} fps = {(n - 1) / fps:.3f} s between first and last frame, {have}; "
        "lower frames.num_frames or frames.fps"
    )
