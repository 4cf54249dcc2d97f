"""build/analysis/: each analysed video's shots and quality measures, recorded once and reused (docs/long-videos.md).

A record names the video (its resolved path, size and mtime_ns, as the plan's fingerprint does) and the settings
that decide the analysis (detector, threshold, minimum shot, analysis width, dissolve lag or the TransNetV2 weights'
SHA-256, the analysis format); a rerun, a resume or an --extend reads it instead of decoding the video again while
all of those match. One file per video, written atomically when its analysis ends, so an interrupted pass keeps what
it finished. The file name is a digest of the path: ids and paths never name files.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable

from ..cache.layout import ANALYSIS_DIR
from ..config import BuildConfig, SegmentsConfig
from ..decode.shot_analysis import AnalysisSettings, VideoAnalysis, analyse_video
from ..errors import ConfigError, SampleRejected
from ..io import canonical_json, write_text_atomic
from ..records import Reject, SourceEntry

Analyses = dict[str, "VideoAnalysis | Reject"]  # resolved video path -> its analysis, or why it has none
Analyser = Callable[[list[SourceEntry]], Analyses]


def analysis_needed(config: BuildConfig, entries: list[SourceEntry]) -> bool:
    """The analysis pass runs when a segments key is set or a table row names a segment; otherwise the plan is
    what it always was."""
    return config.segments != SegmentsConfig() or any(entry.segment is not None for entry in entries)


def analysis_settings(config: BuildConfig) -> AnalysisSettings:
    """The settings of the config's analysis; with TransNetV2, its weights' path and SHA-256 (hashed once a process)."""
    segments = config.segments
    weights = digest = None
    if segments.detect == "transnetv2":
        from ..decode.transnetv2_weights import weights_sha256  # torch, for this detector only

        weights = segments.transnetv2_weights
        digest = weights_sha256(weights)
    return AnalysisSettings(segments.detect, segments.threshold, segments.min_shot_frames, segments.analysis_width,
                            segments.dissolve_frames, weights, digest)


def record_path(build_dir: Path, video: str) -> Path:
    name = hashlib.sha256(os.path.abspath(video).encode("utf-8")).hexdigest()[:32]
    return Path(build_dir) / ANALYSIS_DIR / f"{name}.json"


def _identity(video: str, settings: AnalysisSettings) -> dict[str, Any] | None:
    try:
        status = os.stat(video)
    except OSError:
        return None
    return {"video": os.path.abspath(video), "size": status.st_size, "mtime_ns": status.st_mtime_ns,
            "settings": settings.record()}


def recorded_analysis(build_dir: Path, video: str, settings: AnalysisSettings) -> VideoAnalysis | None:
    """The recorded analysis of this version of `video` under these settings, or None (absent, stale, damaged)."""
    identity = _identity(video, settings)
    path = record_path(build_dir, video)
    if identity is None or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("identity") != identity:
            return None
        return VideoAnalysis.from_json(data["analysis"])
    except (ValueError, KeyError, TypeError):
        return None  # a damaged record is analysed again


def analyse_recorded(video: str, key: str, settings: AnalysisSettings, build_dir: Path | None
                     ) -> VideoAnalysis | Reject:
    """The video's analysis: its record when it matches, else a fresh analysis, recorded (build_dir None: not)."""
    if build_dir is not None:
        recorded = recorded_analysis(build_dir, video, settings)
        if recorded is not None:
            return recorded
    identity = _identity(video, settings)
    try:
        analysis = analyse_video(video, key, settings)
    except SampleRejected as rejected:
        return Reject(key, -1, rejected.reason, rejected.detail, "probe")
    except ConfigError:
        raise  # the detector's weights, not the video: the build stops
    except Exception as error:  # noqa: BLE001 - the probe rejects such a video, naming why
        return Reject(key, -1, "unreadable", f"{video}: analysing it failed ({type(error).__name__}: {error})",
                      "probe")
    if build_dir is not None and identity is not None:
        record = {"identity": identity, "analysis": analysis.to_json()}
        write_text_atomic(record_path(build_dir, video), canonical_json(record) + "\n")
    return analysis


def analyse_serially(config: BuildConfig, build_dir: Path | None) -> Analyser:
    """An Analyser that runs in this process, one video after the other."""
    settings = analysis_settings(config)

    def analyse(entries: list[SourceEntry]) -> Analyses:
        found: Analyses = {}
        for entry in entries:
            if entry.video not in found:
                found[entry.video] = analyse_recorded(entry.video, entry.key, settings, build_dir)
        return found

    return analyse
