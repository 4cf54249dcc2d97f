"""The analysis pass of a long video (docs/long-videos.md): one decode from its start, every shown frame scaled down
to `analysis_width`, fed to a shot detector, and measured for the quality scores (luma brightness, blank frames,
motion between consecutive frames).

Frame i is the i-th picture the decoder shows, as in the probe (decode/stream_probe.py), so cut frames index the same
frames the windows do. TransNetV2 (decode/transnetv2_cuts.py) is fed every frame scaled to 48x27, as its official
code scales them, and finds hard cuts and gradual transitions itself. PySceneDetect's detectors (ContentDetector or
AdaptiveDetector) are fed the low-resolution frames one by one for hard cuts. Gradual transitions (dissolves, fades)
change each frame too little for them, so a second, lagged pass feeds `dissolve_frames` ContentDetectors, detector j
seeing frames j, j + k, j + 2k, ... (k = dissolve_frames): each compares frames k apart, where a transition of up to
about k frames looks like a cut. Every frame goes to exactly one of them, so the lagged pass costs about one more
detector. Its flags cluster around each transition; a cluster that is not a hard cut is a gradual transition,
centred where its flagged steps balance, and the frames it spans are kept out of both neighbouring shots.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import av
import numpy as np

from ..errors import ConfigError, SampleRejected
from .container import open_video, seconds
from .transitions import Transition, spaced

ANALYSIS_VERSION = 1
DETECTORS = ("none", "content", "adaptive", "transnetv2")
# PySceneDetect's own defaults; TransNetV2's official predictions_to_scenes threshold
DEFAULT_THRESHOLDS = {"content": 27.0, "adaptive": 3.0, "transnetv2": 0.5}
TRANSNETV2_WIDTH, TRANSNETV2_HEIGHT = 48, 27  # its input frames (decode/transnetv2_model.py)
BLANK_LUMA = 16.0  # a frame whose mean luma (0..255) is below this is black
BLANK_SPREAD = 2.0  # ... or whose luma standard deviation is below this is blank (one flat colour)
# a lagged flag is a blend when the middle frame is this close (relative to how much the ends differ) to the average
# of the frames half a lag before and after: 0 for an exact linear dissolve, 0.5 for a hard cut
BLEND_BEND = 0.2


@dataclass(frozen=True)
class AnalysisSettings:
    """What decides an analysis' result: a recorded analysis is reused only under the same settings."""

    detect: str = "none"
    threshold: float | None = None
    min_shot_frames: int = 15
    analysis_width: int = 128
    dissolve_frames: int = 8
    transnetv2_weights: str | None = None  # detect=transnetv2: where its weights are ...
    transnetv2_sha256: str | None = None  # ... and their SHA-256, which is what the record holds

    @property
    def detector_threshold(self) -> float | None:
        if self.detect == "none":
            return None
        return DEFAULT_THRESHOLDS[self.detect] if self.threshold is None else self.threshold

    def record(self) -> dict[str, Any]:
        record = {**asdict(self), "threshold": self.detector_threshold, "version": ANALYSIS_VERSION}
        del record["transnetv2_weights"]  # where the weights lie changes nothing; their digest does
        if self.detect == "transnetv2":
            del record["dissolve_frames"]  # TransNetV2 finds gradual transitions itself
        else:
            del record["transnetv2_sha256"]  # the records of the other detectors keep the keys they always had
        return record


@dataclass
class VideoAnalysis:
    """One video's analysis: its frames' times, the transitions found and per-frame quality measures."""

    pts: list[float]
    transitions: list[Transition]
    brightness: list[float]  # mean luma per frame, 0..255
    motion: list[float]  # mean absolute luma difference to the previous frame (0 for frame 0)
    blank: str  # "1" per black or blank frame, "0" otherwise
    analysis_size: tuple[int, int]
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def num_frames(self) -> int:
        return len(self.pts)

    def to_json(self) -> dict[str, Any]:
        return {"settings": self.settings, "analysis_size": list(self.analysis_size), "pts": self.pts,
                "transitions": [asdict(t) for t in self.transitions],
                "cuts": [{"frame": t.frame, "time": self.pts[t.frame], "kind": t.kind} for t in self.transitions],
                "brightness": self.brightness, "motion": self.motion, "blank": self.blank}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> VideoAnalysis:
        return cls(pts=[float(p) for p in data["pts"]], transitions=[Transition(**t) for t in data["transitions"]],
                   brightness=[float(b) for b in data["brightness"]], motion=[float(m) for m in data["motion"]],
                   blank=str(data["blank"]), analysis_size=tuple(data["analysis_size"]),
                   settings=dict(data["settings"]))


def make_detector(kind: str, threshold: float, min_shot_frames: int):
    """PySceneDetect's detector class for `kind`, with its threshold and minimum shot length."""
    try:
        from scenedetect import AdaptiveDetector, ContentDetector
    except ImportError:
        raise ConfigError("segments.detect needs PySceneDetect: pip install 'latentforge[scenes]'") from None
    if kind == "content":
        return ContentDetector(threshold=threshold, min_scene_len=min_shot_frames)
    return AdaptiveDetector(adaptive_threshold=threshold, min_scene_len=min_shot_frames)


class _Cuts:
    """The detectors of one video, fed one low-resolution BGR frame (and its luma) at a time."""

    def __init__(self, settings: AnalysisSettings, fps: float):
        from scenedetect.common import FrameTimecode

        self._timecode, self._fps = FrameTimecode, fps
        self.lag = settings.dissolve_frames
        threshold = settings.detector_threshold
        self.main = make_detector(settings.detect, threshold, settings.min_shot_frames)
        lag_threshold = threshold if settings.detect == "content" else DEFAULT_THRESHOLDS["content"]
        self.phases = [make_detector("content", lag_threshold, 1) for _ in range(self.lag)]
        self.hard: list[int] = []
        self.flags: list[int] = []  # step ends e: frames e - lag and e differ like a cut
        self.half = max(1, self.lag // 2)
        self._recent: list[np.ndarray] = []  # the last 2 * half + 1 luma frames
        self.spread: dict[int, float] = {}  # m -> mean |f(m + h) - f(m - h)|
        self.bend: dict[int, float] = {}  # m -> mean |f(m) - (f(m - h) + f(m + h)) / 2|: 0 inside a blend

    def feed(self, index: int, image: np.ndarray, luma: np.ndarray) -> None:
        timecode = self._timecode(index, self._fps)
        self.hard += [int(t.frame_num) for t in self.main.process_frame(timecode, image)]
        if not self.lag:
            return
        self.flags += [int(t.frame_num) for t in self.phases[index % self.lag].process_frame(timecode, image)]
        self._recent.append(luma)
        if len(self._recent) > 2 * self.half + 1:
            self._recent.pop(0)
        if len(self._recent) == 2 * self.half + 1:
            before, middle, after = self._recent[0], self._recent[self.half], self._recent[-1]
            centre = index - self.half
            self.spread[centre] = float(np.abs(after - before).mean())
            self.bend[centre] = float(np.abs(middle - (before + after) / 2).mean())

    def finish(self, frames: int, min_shot_frames: int) -> list[Transition]:
        last = self._timecode(max(frames - 1, 0), self._fps)
        self.hard += [int(t.frame_num) for t in self.main.post_process(last)]
        found = [Transition(c, c, c, "cut") for c in sorted(set(self.hard)) if 0 < c < frames]
        for gradual in self._gradual(sorted(set(self.flags))):
            near = [t for t in found if gradual.first - self.half <= t.frame <= gradual.last + self.half]
            found = [t for t in found if t not in near] + [gradual]  # a hard flag inside a dissolve is the dissolve
        return spaced(found, frames, min_shot_frames)

    def _gradual(self, flags: list[int]) -> list[Transition]:
        """Clusters of lagged flags (step ends less than `lag` apart) that are blends. A cluster's blended frames
        are the frames m whose neighbours h before and after differ by at least half the cluster's peak difference
        while m is close to their average (a dissolve or fade mixes two pictures; motion or a hard cut does not).
        The transition spans them widened by h - 1 on each side (the frames they mix), its cut is their middle."""
        clusters: list[list[int]] = []
        for end in flags:
            if clusters and end - clusters[-1][-1] < self.lag:
                clusters[-1].append(end)
            else:
                clusters.append([end])
        transitions = []
        for cluster in clusters:
            span = [m for m in range(cluster[0] - self.lag, cluster[-1] + 1) if m in self.spread]
            if not span:
                continue
            peak = max(self.spread[m] for m in span)
            if peak <= 0:
                continue
            # blended frames: the ends differ (at least half the peak) and the middle is close to their average
            blended = [m for m in span if self.spread[m] >= 0.5 * peak and self.bend[m] <= BLEND_BEND * self.spread[m]]
            if len(blended) < 2:
                continue  # not a blend: motion, or a hard cut the main detector judges
            centre = (blended[0] + blended[-1] + 1) // 2
            first, last = blended[0] - self.half + 1, blended[-1] + self.half  # the frames the blended ones mix
            transitions.append(Transition(centre, min(first, centre), max(last, centre + 1), "gradual"))
        return transitions


def _transnetv2_windows(settings: AnalysisSettings):
    """detect=transnetv2: the windowed predictions of the model with the settings' weights (torch is imported only
    here, so the other detectors' workers never load it); else None."""
    if settings.detect != "transnetv2":
        return None
    from .transnetv2_cuts import WindowedPredictions
    from .transnetv2_weights import transnetv2_predictor

    return WindowedPredictions(transnetv2_predictor(settings.transnetv2_weights, settings.transnetv2_sha256))


def analysis_size(width: int, height: int, analysis_width: int) -> tuple[int, int]:
    """The analysed frame size: `analysis_width` (never wider than the source) by the source's aspect, even."""
    out_w = min(analysis_width, width) // 2 * 2 or 2
    out_h = max(2, round(out_w * height / width / 2) * 2)
    return out_w, out_h


def analyse_video(path: str, sample_id: str, settings: AnalysisSettings) -> VideoAnalysis:
    """Decode `path` once from its start at low resolution; its transitions (when settings.detect is not none) and
    per-frame quality measures. SampleRejected('unreadable') when it cannot be decoded."""
    with open_video(path, sample_id) as container:
        if not container.streams.video:
            raise SampleRejected("unreadable", sample_id, f"{path} has no video stream")
        stream = container.streams.video[0]
        stream.codec_context.thread_type = "AUTO"
        # deblocking changes nothing a low-resolution analysis sees, and costs a fifth of an H.264 decode
        stream.codec_context.options = {"skip_loop_filter": "all"}
        fps = float(stream.average_rate or 25)
        cuts = None if settings.detect in ("none", "transnetv2") else _Cuts(settings, fps)
        network = _transnetv2_windows(settings)
        ticks: list[int] = []
        brightness: list[float] = []
        motion: list[float] = []
        blank: list[str] = []
        size = None
        previous = None
        try:
            for frame in container.decode(stream):
                tick = frame.pts if frame.pts is not None else frame.dts
                if tick is None:
                    raise SampleRejected("unreadable", sample_id, f"{path}: frame {len(ticks)} has no timestamp")
                if size is None:
                    size = analysis_size(frame.width, frame.height, settings.analysis_width)
                image = frame.reformat(width=size[0], height=size[1], format="bgr24",
                                       interpolation="FAST_BILINEAR").to_ndarray()
                luma = image @ np.array([0.114, 0.587, 0.299], np.float32)
                mean = float(luma.mean())
                brightness.append(round(mean, 3))
                motion.append(0.0 if previous is None else round(float(np.abs(luma - previous).mean()), 3))
                blank.append("1" if mean < BLANK_LUMA or float(luma.std()) < BLANK_SPREAD else "0")
                previous = luma
                if cuts is not None:
                    cuts.feed(len(ticks), image, luma)
                if network is not None:  # the whole picture to 48x27, as the official code has FFmpeg scale it
                    network.feed(frame.reformat(width=TRANSNETV2_WIDTH, height=TRANSNETV2_HEIGHT, format="rgb24",
                                                interpolation="BICUBIC").to_ndarray())
                ticks.append(tick)
        except av.FFmpegError as error:
            raise SampleRejected("unreadable", sample_id, f"{path}: decoding failed ({error})") from None
        if not ticks:
            raise SampleRejected("unreadable", sample_id, f"{path}: no frame could be decoded")
        pts = [seconds(tick, stream.time_base) for tick in sorted(ticks)]  # the probe's rule (stream_probe.py)
    transitions = [] if cuts is None else cuts.finish(len(pts), settings.min_shot_frames)
    if network is not None:
        from .transnetv2_cuts import transitions_from_predictions

        single, all_frames = network.finish()
        transitions = transitions_from_predictions(single, all_frames, settings.detector_threshold,
                                                   settings.min_shot_frames)
    return VideoAnalysis(pts=pts, transitions=transitions, brightness=brightness, motion=motion,
                         blank="".join(blank), analysis_size=size, settings=settings.record())
