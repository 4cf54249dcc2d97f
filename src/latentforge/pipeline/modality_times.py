"""Which frame of a mask or depth source goes with each frame of the RGB window (docs/modalities.md).

By frame index (frame i with video frame i) unless the source has a rate of its own that differs: a video source at
another frame rate than the RGB video, or a PNG folder or array given a rate (modalities.<name>.fps). Then each RGB
frame takes the source frame shown at its presentation time, both counted from their stream's first frame: the last
source frame whose time is <= the RGB frame's + 1 ms (docs/frames.md's rule; the 1 ms absorbs the two containers'
rounding of times), the last one held for half a source frame period. A source that does not cover the window
rejects the sample (side_stream_short).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..decode.sources import ModalitySource
from ..errors import SampleRejected
from ..records import VideoInfo
from ..transforms.time_match import CROSS_STREAM_SLACK, coverage_text, shown_at
from ..transforms.window import FrameWindow

# Two video rates closer than this share of the RGB rate are the same rate: frames pair by index.
SAME_RATE = 1e-3


@dataclass(frozen=True)
class TimedFrames:
    """A source matched to the window by time: its frame for each window frame, and its rate."""

    indices: tuple[int, ...]
    fps: float


def source_rate(source: ModalitySource, rgb: VideoInfo, configured: str) -> float | None:
    """The rate the source is matched by time at, or None for the frame-index rule."""
    if source.kind == "video" and source.video is not None:
        rate = source.video.fps
        return rate if rate > 0 and abs(rate - rgb.fps) > SAME_RATE * rgb.fps else None
    return None if configured == "source" else float(configured)


def frames_by_time(source: ModalitySource, rgb: VideoInfo, window: FrameWindow, rate: float, sample_id: str
                   ) -> TimedFrames:
    """The source frame shown at each window frame's time; rejects side_stream_short when it does not cover them."""
    if source.kind == "video" and source.video is not None:
        times = [t - source.video.pts[0] for t in source.video.pts]
    else:
        times = [j / rate for j in range(source.num_frames)]
    wanted = [t - rgb.pts[0] for t in window.timestamps]
    tail = 0.5 / rate
    found = shown_at(times, wanted, tail=tail, slack=CROSS_STREAM_SLACK)
    if -1 in found:
        raise SampleRejected("side_stream_short", sample_id,
                             f"{source.modality} source {source.path} ({source.num_frames} frames at {rate:g} fps) "
                             f"{coverage_text(times, tail, wanted)} from the video's first frame; export it over "
                             "the whole video or choose windows it covers")
    return TimedFrames(tuple(found), rate)
