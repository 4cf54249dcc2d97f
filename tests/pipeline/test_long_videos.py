"""From long videos to windows: shot detection on a generated video with known cuts and a dissolve, windows inside
shots, shot_too_short, the analysis record reused by a rerun, table segments and the quality scores
(docs/long-videos.md). Real media written by PyAV, PySceneDetect's detectors as they ship."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from helpers.exec_world import build_args, exec_config
from helpers.long_video import write_shots
from latentforge import query_indices
from latentforge.cache.layout import ANALYSIS_DIR
from latentforge.decode.shot_analysis import AnalysisSettings, analyse_video
from latentforge.errors import ConfigError
from latentforge.pipeline.plan import plan_samples

pytest.importorskip("scenedetect")

LENGTHS, DISSOLVES = [40, 30, 50, 45], {2: 12}  # hard cuts at 40 and 70, a 12-frame dissolve at frames 108..119


@pytest.fixture(scope="module")
def long_video(tmp_path_factory) -> tuple[Path, list[int], list[tuple[int, int]]]:
    return write_shots(tmp_path_factory.mktemp("long") / "long.mp4", LENGTHS, DISSOLVES)


@pytest.mark.parametrize("detect", ["content", "adaptive"])
def test_every_cut_within_two_frames_and_no_false_cut(long_video, detect):
    path, cuts, blends = long_video
    analysis = analyse_video(str(path), "long", AnalysisSettings(detect=detect))
    found = [t.frame for t in analysis.transitions]
    (first, last), = blends
    expected = cuts + [(first + last + 1) / 2]  # a dissolve's cut is its middle
    assert len(found) == len(expected), (found, expected)
    for frame, want in zip(found, expected):
        assert abs(frame - want) <= 2, (found, expected)
    gradual = [t for t in analysis.transitions if t.kind == "gradual"]
    assert len(gradual) == 1 and gradual[0].first >= first - 2 and gradual[0].last <= last + 3
    assert analysis.num_frames == sum(LENGTHS) - 12 and len(analysis.motion) == analysis.num_frames


def _table(folder: Path, rows: list[dict], fields=("id", "video", "caption")) -> Path:
    table = folder / "samples.csv"
    with open(table, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(fields))
        writer.writeheader()
        writer.writerows(rows)
    return table


def _rows(root: Path, name: str) -> list[dict]:
    return [json.loads(line) for line in (root / name).read_text().splitlines()]


def test_windows_stay_inside_shots_and_a_rerun_reuses_the_recorded_shots(tmp_path, long_video, cli):
    path, cuts, blends = long_video
    table = _table(tmp_path, [{"id": "long", "video": str(path), "caption": "three scenes"}])
    root = tmp_path / "cache"
    args = build_args(table, root, "--set", "segments.detect=content", "--set", "frames.windows=every 12",
                      "--set", "frames.num_frames=21", "--set", "segments.min_shot_frames=10")
    done = cli(args)
    assert done.returncode == 0, done.stderr
    manifest = _rows(root, "manifest.jsonl")
    boundaries = cuts + list(range(blends[0][0], blends[0][1] + 1))
    for row in manifest:
        frames = row["provenance"]["frame_indices"]
        assert not any(frames[0] < b <= frames[-1] for b in boundaries), (row["sample_id"], frames)
        shot = row["provenance"]["segment"]["shot"]
        assert row["sample_id"] == f"long#shot{shot:03d}@{frames[0]}"
        assert set(row["provenance"]["quality"]) == {"motion", "black_fraction", "brightness"}
    ids = [row["sample_id"] for row in manifest]
    assert [int(i.rpartition("@")[2]) for i in ids] == sorted(int(i.rpartition("@")[2]) for i in ids)
    # shot 1 (frames 40..69, 26 after the margins) holds one 21-frame window; all four shots yield windows
    assert {row["provenance"]["segment"]["shot"] for row in manifest} == {0, 1, 2, 3}
    assert len(query_indices(root, "motion > 0 AND black_fraction = 0 AND brightness > 20")) == len(manifest)

    records = list((root / "build" / ANALYSIS_DIR).glob("*.json"))
    assert len(records) == 1 and json.loads(records[0].read_text())["analysis"]["cuts"][0]["frame"] == cuts[0]
    before = records[0].stat().st_mtime_ns
    again = cli(args)
    assert again.returncode == 0, again.stderr
    assert records[0].stat().st_mtime_ns == before  # read, not detected again
    assert _rows(root, "manifest.jsonl") == manifest


def test_a_shot_shorter_than_a_window_is_a_recorded_reject(tmp_path, long_video):
    path, _, _ = long_video
    table = _table(tmp_path, [{"id": "long", "video": str(path), "caption": "x"}])
    config = exec_config(table, tmp_path / "cache", "segments.detect=content", "frames.num_frames=29",
                         "segments.min_shot_frames=10")
    samples, rejects = plan_samples(config)
    short = [r for r in rejects if r.reason == "shot_too_short"]
    assert [r.sample_id for r in short] == ["long#shot001"] and "frames 42..67" in short[0].detail
    assert [s.sample_id for s in samples] == ["long#shot000@0", "long#shot002@72", "long#shot003@123"]


def test_quality_thresholds_reject_with_their_own_reasons(tmp_path, long_video):
    path, _, _ = long_video
    table = _table(tmp_path, [{"id": "long", "video": str(path), "caption": "x"}])
    for override, reason in (("segments.min_motion=200", "low_motion"), ("segments.max_black_fraction=-0", None)):
        config = exec_config(table, tmp_path / "cache", "segments.quality=true", override)
        samples, rejects = plan_samples(config)
        if reason:
            assert [r.reason for r in rejects] == [reason] and not samples
        else:
            assert samples[0].segment["quality"]["black_fraction"] == 0.0 and not rejects


def test_segment_rows_each_with_a_caption_and_the_bad_ones_rejected_by_row(tmp_path, long_video, cli):
    path, _, _ = long_video
    rows = [{"id": "a", "video": str(path), "caption": "first scene", "start": "0", "end": "1.5"},
            {"id": "b", "video": str(path), "caption": "far past the end", "start": "5", "end": "99"},
            {"id": "c", "video": str(path), "caption": "backwards", "start": "3", "end": "2"},
            {"id": "d", "video": str(path), "caption": "overlaps a", "start": "1", "end": "2.5"},
            {"id": "e", "video": str(path), "caption": "third scene", "start": "3", "end": "4"}]
    table = _table(tmp_path, rows, ("id", "video", "caption", "start", "end"))
    root = tmp_path / "cache"
    done = cli(build_args(table, root, "--set", "dataset.start_column=start", "--set", "dataset.end_column=end",
                          "--max-reject-fraction", "1"))
    assert done.returncode == 0, done.stderr
    manifest = {row["sample_id"]: row for row in _rows(root, "manifest.jsonl")}
    assert sorted(manifest) == ["a", "e"]
    assert manifest["a"]["prompt"] == "first scene" and manifest["e"]["prompt"] == "third scene"
    assert manifest["e"]["provenance"]["frame_indices"][0] == 72  # 3 s at 24 fps
    assert manifest["a"]["provenance"]["frame_indices"][-1] < 36
    rejects = {row["sample_id"]: row for row in _rows(root, "rejects.jsonl")}
    assert {k: r["reason"] for k, r in rejects.items()} == {"b": "bad_segment", "c": "bad_segment",
                                                             "d": "bad_segment"}
    assert "row 2" in rejects["b"]["detail"] and "outside the video" in rejects["b"]["detail"]
    assert "row 3" in rejects["c"]["detail"] and "ends before it starts" in rejects["c"]["detail"]
    assert "row 4" in rejects["d"]["detail"] and "overlaps" in rejects["d"]["detail"] and "row 1" in \
        rejects["d"]["detail"]
    assert all("\n" not in r["detail"] for r in rejects.values())


def test_segments_config_is_checked(tmp_path):
    table = _table(tmp_path, [{"id": "x", "video": "x.mp4", "caption": "x"}])
    with pytest.raises(ConfigError, match="allowed keys in segments: detect, threshold"):
        exec_config(table, tmp_path / "c", "segments.detector=content")
    with pytest.raises(ConfigError, match="segments.detect='shots' is not allowed"):
        exec_config(table, tmp_path / "c", "segments.detect=shots")
    with pytest.raises(ConfigError, match="dataset.segment_unit"):
        exec_config(table, tmp_path / "c", "dataset.segment_unit=minutes")
