"""segments.detect=transnetv2 on a generated video with hard cuts and a dissolve (docs/long-videos.md): the windows
cover every frame exactly once, the per-frame predictions become transitions as documented, the analysis pass feeds
the network the video's frames in order, the analysis is recorded with the weights' SHA-256 and reused, and the
config and pre-flight refuse what they must.

Only seeded random weights exist here (the official ones cannot be downloaded), and random weights find no real
cuts: what these tests check is the plumbing. How well TransNetV2 finds real cuts needs the official weights;
our module's agreement with the official code is tests/decode/test_transnetv2_model.py's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers.exec_world import build_args, exec_config
from helpers.long_video import write_shots
from helpers.transnetv2_seeded import seeded_state_dict
from latentforge.cache.layout import ANALYSIS_DIR
from latentforge.decode import transnetv2_weights
from latentforge.decode.shot_analysis import AnalysisSettings, analyse_video
from latentforge.decode.transitions import Transition
from latentforge.decode.transnetv2_cuts import CONTEXT, WINDOW, WindowedPredictions, transitions_from_predictions
from latentforge.decode.transnetv2_model import TransNetV2
from latentforge.errors import ConfigError
from latentforge.pipeline.analysis_records import analyse_recorded, record_path

LENGTHS, DISSOLVES = [40, 30, 50, 45], {2: 12}  # hard cuts at 40 and 70, a 12-frame dissolve at frames 108..119


@pytest.fixture(scope="module")
def long_video(tmp_path_factory) -> tuple[Path, list[int], list[tuple[int, int]]]:
    return write_shots(tmp_path_factory.mktemp("long") / "long.mp4", LENGTHS, DISSOLVES)


@pytest.fixture(scope="module")
def weights(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("weights") / "transnetv2-seeded.pth"
    torch.save(seeded_state_dict(TransNetV2().state_dict()), path)
    return path


@pytest.mark.parametrize("frames", [1, 49, 50, 51, 75, 100, 137, 150])
def test_windows_predict_every_frame_exactly_once(frames):
    seen = []

    def predict(window):  # each frame holds its own index; the prediction of a frame is that index
        assert window.shape == (WINDOW, 27, 48, 3)
        seen.append(window[:, 0, 0, 0].astype(int) * 256 + window[:, 0, 0, 1])
        index = (seen[-1]).astype(np.float32)
        return index, -index

    windows = WindowedPredictions(predict)
    for i in range(frames):
        windows.feed(np.stack([np.full((27, 48), i // 256), np.full((27, 48), i % 256), np.zeros((27, 48))],
                              -1).astype(np.uint8))
    single, all_frames = windows.finish()
    assert single.tolist() == list(range(frames)) and all_frames.tolist() == [-i for i in range(frames)]
    assert seen[0][:CONTEXT + 1].tolist() == [0] * (CONTEXT + 1)  # 25 copies of the first frame before it
    assert seen[-1][-1] == frames - 1  # the last window padded with the last frame
    assert len(seen) == -(-frames // 50)


def _probs(frames: int, single: dict[int, float], all_frames: dict[int, float] | None = None):
    one, many = np.full(frames, 0.01, np.float32), np.full(frames, 0.01, np.float32)
    for i, p in single.items():
        one[i] = p
    for i, p in (all_frames or {}).items():
        many[i] = p
    return one, many


def test_predictions_become_hard_cuts_and_gradual_transitions():
    # one flagged frame: the old shot's last frame, so the new shot starts after it
    assert transitions_from_predictions(*_probs(100, {39: 0.9}), 0.5, 15) == [Transition(40, 40, 40, "cut")]
    # a run: its first frame is the old shot's last, its others belong to neither shot
    assert transitions_from_predictions(*_probs(100, {39: 0.6, 40: 0.9}), 0.5, 15) == [
        Transition(41, 40, 41, "gradual")]
    # the all-frames head widens the run to the frames a dissolve mixes (107 .. 119)
    dissolve = transitions_from_predictions(*_probs(200, {112: 0.7, 113: 0.8}, {i: 0.9 for i in range(107, 120)}),
                                            0.5, 15)
    assert dissolve == [Transition(114, 108, 120, "gradual")]
    # the all-frames head alone makes no transition; a run touching the first or last frame is none either
    assert transitions_from_predictions(*_probs(100, {0: 0.9, 99: 0.9}, {50: 0.99}), 0.5, 15) == []
    # the threshold is the single-frame head's; a shot shorter than min_shot_frames drops the later transition
    assert transitions_from_predictions(*_probs(100, {39: 0.4}), 0.5, 15) == []
    assert transitions_from_predictions(*_probs(100, {39: 0.4}), 0.3, 15) == [Transition(40, 40, 40, "cut")]
    assert [t.frame for t in transitions_from_predictions(*_probs(100, {39: 0.9, 49: 0.9, 70: 0.9}), 0.5, 15)] == [
        40, 71]


def test_the_analysis_feeds_the_network_every_frame_in_order(long_video, weights, monkeypatch):
    """A stand-in for the network that flags a frame whose successor differs a lot (mean absolute difference above
    20; within these shots it stays below 13, across their cuts it is 28 and 64): the hard cuts come out where the
    video has them only when frames reach the windows at 48x27, in order, each once."""
    path, cuts, _ = long_video

    def flag_changes(path, sha256):
        def predict(window):
            assert window.shape == (WINDOW, 27, 48, 3) and window.dtype == np.uint8
            step = np.abs(np.diff(window.astype(np.float32), axis=0)).mean(axis=(1, 2, 3))
            flags = np.append(step > 20, False).astype(np.float32)
            return flags, flags
        return predict

    monkeypatch.setattr(transnetv2_weights, "transnetv2_predictor", flag_changes)
    settings = AnalysisSettings("transnetv2", min_shot_frames=10, transnetv2_weights=str(weights),
                                transnetv2_sha256="0" * 64)
    analysis = analyse_video(str(path), "long", settings)
    assert [t.frame for t in analysis.transitions if t.kind == "cut"] == cuts
    assert analysis.num_frames == sum(LENGTHS) - 12


def test_the_analysis_is_recorded_with_the_weights_digest_and_reused(tmp_path, long_video, weights):
    path, _, _ = long_video
    digest = transnetv2_weights.check_weights(str(weights), None)
    settings = AnalysisSettings("transnetv2", transnetv2_weights=str(weights), transnetv2_sha256=digest)
    analysis = analyse_recorded(str(path), "long", settings, tmp_path)
    record = record_path(tmp_path, str(path))
    recorded = json.loads(record.read_text())
    assert recorded["analysis"]["settings"] == {"detect": "transnetv2", "threshold": 0.5, "min_shot_frames": 15,
                                                "analysis_width": 128, "transnetv2_sha256": digest, "version": 1}
    assert all(0 < t.first <= t.frame <= t.last <= analysis.num_frames for t in analysis.transitions)
    before = record.stat().st_mtime_ns
    moved = tmp_path / "moved.pth"
    moved.write_bytes(weights.read_bytes())  # the same weights elsewhere: the record still holds
    again = analyse_recorded(str(path), "long", AnalysisSettings("transnetv2", transnetv2_weights=str(moved),
                                                                 transnetv2_sha256=digest), tmp_path)
    assert record.stat().st_mtime_ns == before and again == analysis
    with pytest.raises(ConfigError, match="changed while the build ran"):  # other weights: analysed again
        analyse_recorded(str(path), "long", AnalysisSettings("transnetv2", transnetv2_weights=str(moved),
                                                             transnetv2_sha256="f" * 64), tmp_path)


def test_a_build_with_transnetv2_records_it_and_a_rerun_reuses_it(tmp_path, long_video, weights, cli):
    path, _, _ = long_video
    table = tmp_path / "samples.csv"
    table.write_text(f"id,video,caption\nlong,{path},scenes\n")
    root = tmp_path / "cache"
    args = build_args(table, root, "--set", "segments.detect=transnetv2", "--set",
                      f"segments.transnetv2_weights={weights}", "--set", "frames.windows=every 40",
                      "--set", "frames.num_frames=21", "--max-reject-fraction", "1")
    done = cli(args)
    assert done.returncode == 0, done.stderr
    records = list((root / "build" / ANALYSIS_DIR).glob("*.json"))
    digest = transnetv2_weights.weights_sha256(str(weights))
    assert len(records) == 1 and json.loads(records[0].read_text())["analysis"]["settings"]["transnetv2_sha256"] \
        == digest
    before = records[0].stat().st_mtime_ns
    again = cli(args)
    assert again.returncode == 0, again.stderr
    assert records[0].stat().st_mtime_ns == before  # read, not analysed again


def test_transnetv2_config_and_preflight_refusals(tmp_path, long_video, cli):
    path, _, _ = long_video
    table = tmp_path / "samples.csv"
    table.write_text(f"id,video,caption\nlong,{path},scenes\n")
    with pytest.raises(ConfigError, match="needs segments.transnetv2_weights.*downloads none"):
        exec_config(table, tmp_path / "c", "segments.detect=transnetv2")
    with pytest.raises(ConfigError, match="read only by segments.detect=transnetv2, but detect is content"):
        exec_config(table, tmp_path / "c", "segments.detect=content", "segments.transnetv2_weights=w.pth")
    with pytest.raises(ConfigError, match="threshold=1.5 must be below 1 for transnetv2"):
        exec_config(table, tmp_path / "c", "segments.detect=transnetv2", "segments.transnetv2_weights=w.pth",
                    "segments.threshold=1.5")
    torch.save({"fc1.weight": torch.zeros(2, 2)}, tmp_path / "other.pth")
    for weights, message in ((tmp_path / "absent.pth", "is not a file"),
                             (tmp_path / "other.pth", "is not TransNetV2's state dict")):
        done = cli(build_args(table, tmp_path / "cache", "--set", "segments.detect=transnetv2",
                              "--set", f"segments.transnetv2_weights={weights}"))
        assert done.returncode != 0 and str(weights) in done.stderr and message in done.stderr, done.stderr
        assert "give the PyTorch state dict converted from the official TensorFlow weights" in done.stderr
        assert not (tmp_path / "cache").exists()  # refused before anything was written
