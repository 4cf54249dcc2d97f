"""Windows inside shots and table segments (docs/long-videos.md).

From one entry and its video's analysis (decode/shot_analysis.py): the spans its windows may use (the table row's
segment, cut at every shot transition less `segments.margin_frames` on each side), the window starts the frames
policy picks inside each span, and each window's quality scores. A window never spans a cut. What cannot be
planned is a plan reject: a shot shorter than a window (`shot_too_short`), a table segment outside its video, ending
before it starts or overlapping an earlier row of the same video (`bad_segment`), a window below
`segments.min_motion` (`low_motion`) or above `segments.max_black_fraction` (`black_frames`).

Sample ids under shot detection: `<key>#shot<k>@<start_frame>` (k counts the video's shots from 0, three digits or
more), so a video's windows sort in time order (plan_order); a table segment without detection keeps the usual
rule (one window: the row's id; several: `<id>@<start>`).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

from ..config import BuildConfig, target_fps, window_step
from ..decode.shot_analysis import VideoAnalysis
from ..records import Reject, SourceEntry
from ..transforms.window import PTS_EPSILON, seeded_choice

Window = tuple[str, int, dict[str, Any]]  # (sample_id, start_frame, the sample's segment record)


@dataclass(frozen=True)
class Span:
    """Frames first .. last - 1 of one video that a window may use."""

    first: int
    last: int
    shot: int | None  # the shot's number within the video, under shot detection


def shot_spans(analysis: VideoAnalysis, margin: int) -> list[Span]:
    """Every shot of the video, `margin` frames dropped on each side of every transition (and its own frames)."""
    bounds = [0]
    for transition in analysis.transitions:
        bounds += [transition.first - margin, transition.last + margin]
    bounds.append(analysis.num_frames)
    return [Span(bounds[2 * k], bounds[2 * k + 1], k) for k in range(len(bounds) // 2)]


class SegmentPlanner:
    """The windows of each entry, called in listing order (an overlapping row is judged against earlier ones)."""

    def __init__(self, config: BuildConfig, analyses: dict[str, VideoAnalysis | Reject]):
        self.config, self.analyses = config, analyses
        self.detect = config.segments.detect != "none"
        self._taken: dict[str, list[tuple[float, float, str]]] = {}  # video -> kept rows' [start, end), origin

    def windows(self, entry: SourceEntry) -> tuple[list[Window], list[Reject]]:
        analysis = self.analyses.get(entry.video)
        if analysis is None or isinstance(analysis, Reject):
            return [(entry.key, None, None)], []  # the probe rejects the video, naming why
        span = self._segment_span(entry, analysis)
        if isinstance(span, Reject):
            return [], [span]
        spans = [span] if not self.detect else [
            Span(max(s.first, span.first), min(s.last, span.last), s.shot)
            for s in shot_spans(analysis, self.config.segments.margin_frames)
            if s.last > span.first and s.first < span.last]
        windows: list[Window] = []
        rejects: list[Reject] = []
        for part in spans:
            placed, rejected = self._windows_in(entry, analysis, part)
            windows += placed
            rejects += rejected
        return windows, rejects

    # ---------------------------------------------------------------- table segments
    def _segment_span(self, entry: SourceEntry, analysis: VideoAnalysis) -> Span | Reject:
        segment = entry.segment
        if segment is None:
            return Span(0, analysis.num_frames, None)
        start, end, unit = segment.get("start"), segment.get("end"), segment.get("unit", "seconds")
        low = 0.0 if start is None else float(start)
        high = float("inf") if end is None else float(end)
        pts, frames = analysis.pts, analysis.num_frames
        step = (pts[-1] - pts[0]) / (frames - 1) if frames > 1 else 0.0
        length = frames if unit == "frames" else pts[-1] - pts[0] + step
        shown = f"{frames} frames" if unit == "frames" else f"{length:.3f} s ({frames} frames)"
        where = f"{entry.origin}: segment [{_number(start)}, {_number(end)}) {unit} of {entry.video_rel}"
        problem = None
        if high <= low:
            problem = "ends before it starts (or is empty)"
        elif low < 0 or (end is not None and high > length + PTS_EPSILON) or low >= length:
            problem = f"lies outside the video, which has {shown}"
        else:
            clash = next((o for a, b, o in self._taken.get(entry.video, []) if low < b and a < high), None)
            if clash is not None:
                problem = f"overlaps {clash}, which is kept"
        if problem is not None:
            return Reject(entry.key, -1, "bad_segment", f"{where} {problem}", "plan")
        self._taken.setdefault(entry.video, []).append((low, high, entry.origin))
        if unit == "frames":
            return Span(int(low), min(frames, int(high)) if end is not None else frames, None)
        first = next(i for i in range(frames) if pts[i] - pts[0] >= low - PTS_EPSILON)
        last = frames if end is None else next(
            (i for i in range(frames) if pts[i] - pts[0] >= high - PTS_EPSILON), frames)
        return Span(first, last, None)

    # ---------------------------------------------------------------- windows and their scores
    def _windows_in(self, entry: SourceEntry, analysis: VideoAnalysis, span: Span
                    ) -> tuple[list[Window], list[Reject]]:
        frames = self.config.frames
        label = entry.key if span.shot is None else f"{entry.key}#shot{span.shot:03d}"
        starts = _valid_starts(analysis, frames.num_frames, target_fps(frames), span)
        if not starts:
            reason = "shot_too_short" if span.shot is not None else "too_short"
            what = f"shot {span.shot}" if span.shot is not None else "the segment"
            return [], [Reject(label, -1, reason, f"{entry.video_rel}: {what} keeps frames {span.first}.."
                               f"{span.last - 1} ({max(0, span.last - span.first)} frames after "
                               f"{self.config.segments.margin_frames} margin frames at each cut), too few for a "
                               f"window of {frames.num_frames} frames{_at_fps(frames.fps)}", "plan")]
        step = window_step(frames)
        if step is not None:
            chosen = [s for s in starts if (s - span.first) % step == 0]
        elif frames.window == "start":
            chosen = [starts[0]]
        elif frames.window == "center":
            chosen = [starts[(len(starts) - 1) // 2]]
        else:
            chosen = [starts[seeded_choice(label, len(starts))]]
        if span.shot is not None:
            ids = [f"{label}@{start}" for start in chosen]
        else:
            ids = [label] if len(chosen) == 1 else [f"{label}@{start}" for start in chosen]
        windows: list[Window] = []
        rejects: list[Reject] = []
        for sample_id, start in zip(ids, chosen):
            indices = _indices(analysis, frames.num_frames, target_fps(frames), start)
            scores = quality_scores(analysis, indices)
            record = {**({"shot": span.shot} if span.shot is not None else {}), "frames": [span.first, span.last],
                      "times": [analysis.pts[span.first], analysis.pts[span.last - 1]], "quality": scores}
            problem = self._quality_problem(scores)
            if problem is not None:
                rejects.append(Reject(sample_id, -1, problem[0], f"{entry.video_rel} frames {indices[0]}.."
                                      f"{indices[-1]}: {problem[1]}", "plan"))
            else:
                windows.append((sample_id, start, record))
        return windows, rejects

    def _quality_problem(self, scores: dict[str, float]) -> tuple[str, str] | None:
        segments = self.config.segments
        if segments.min_motion is not None and scores["motion"] < segments.min_motion:
            return "low_motion", (f"mean frame difference {scores['motion']:g} is below segments.min_motion="
                                  f"{segments.min_motion:g}")
        if segments.max_black_fraction is not None and scores["black_fraction"] > segments.max_black_fraction:
            return "black_frames", (f"{scores['black_fraction']:.1%} of its frames are black or blank, more than "
                                    f"segments.max_black_fraction={segments.max_black_fraction:g}")
        return None


def _valid_starts(analysis: VideoAnalysis, num_frames: int, fps: float | None, span: Span) -> list[int]:
    """The starts whose whole window lies inside the span (frames.md's rules, within first .. last - 1)."""
    if span.last <= span.first:
        return []
    if fps is None:
        return list(range(span.first, span.last - num_frames + 1))
    reach = analysis.pts[span.last - 1] + PTS_EPSILON
    return [s for s in range(span.first, span.last) if analysis.pts[s] + (num_frames - 1) / fps <= reach]


def _indices(analysis: VideoAnalysis, num_frames: int, fps: float | None, start: int) -> list[int]:
    if fps is None:
        return list(range(start, start + num_frames))
    t0 = analysis.pts[start]
    return [bisect.bisect_right(analysis.pts, t0 + k / fps + PTS_EPSILON) - 1 for k in range(num_frames)]


def quality_scores(analysis: VideoAnalysis, indices: list[int]) -> dict[str, float]:
    """A window's scores from its frames' low-resolution measures: motion = mean absolute luma difference between
    consecutive source frames from its first to its last frame; black_fraction = share of its distinct frames that
    are black or blank; brightness = mean luma of its frames (0..255)."""
    first, last = indices[0], indices[-1]
    steps = analysis.motion[first + 1:last + 1]
    distinct = sorted(set(indices))
    return {"motion": round(sum(steps) / len(steps), 3) if steps else 0.0,
            "black_fraction": round(sum(analysis.blank[i] == "1" for i in distinct) / len(distinct), 4),
            "brightness": round(sum(analysis.brightness[i] for i in indices) / len(indices), 3)}


def _number(value: Any) -> str:
    return "open" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _at_fps(fps: str) -> str:
    return "" if fps == "source" else f" at {fps} fps"
