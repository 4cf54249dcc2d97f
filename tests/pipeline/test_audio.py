"""Each window's sound (docs/audio.md): clips PyAV writes with a video and an audio stream, built with
audio.enabled, the stored PCM compared with PyAV's own decode of the file (and a 440 Hz tone's known onset), the
manifest's audio columns, both training Datasets, and the rejects: audio_partial, audio_decode_error."""

from __future__ import annotations

import json

import av
import h5py
import numpy as np
import pyarrow.parquet as pq
import pytest

from helpers.audio_media import tone_after, write_clip_with_audio, write_clip_with_broken_audio
from helpers.builds import build_quietly, read_manifest, tiny_config, write_table
from latentforge import LatentCacheDataset, StreamingLatentDataset, verify
from latentforge.errors import ConfigError

RATE = 16000
FPS = 24
WINDOW = round(9 / FPS * RATE)  # 9 frames at 24 fps: 6000 samples
AUDIO = ("frames.fps=24", "audio.enabled=true")


def pyav_samples(path) -> tuple[float, np.ndarray]:
    """(first sample's time, mono float samples) of the file's audio as PyAV decodes it, no resampling."""
    with av.open(str(path)) as container:
        frames = list(container.decode(audio=0))
    return float(frames[0].time), np.concatenate([f.to_ndarray().reshape(-1) for f in frames]) / 32768.0


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    folder = tmp_path_factory.mktemp("audio")
    clips = {
        "tone": write_clip_with_audio(folder / "tone.mov", audio=tone_after(0.2, RATE, 1.0)),
        "late": write_clip_with_audio(folder / "late.mov", audio=tone_after(0.0, RATE, 0.9, start=0.1),
                                      audio_start=0.1),
        "loud48k": write_clip_with_audio(folder / "loud48k.mov", audio=tone_after(0.25, 48000, 1.0, channels=2),
                                         rate=48000),
        "silent": write_clip_with_audio(folder / "silent.mp4"),
        "broken": write_clip_with_broken_audio(folder / "broken.mp4"),
    }
    rows = [{"id": name, "video": path.name, "caption": f"a clip {name}", "objects": 1} for name, path in clips.items()]
    return folder, write_table(rows, folder / "table.csv"), clips


@pytest.fixture(scope="module")
def padded(world, tmp_path_factory):
    _, table, _ = world
    root = tmp_path_factory.mktemp("padded") / "cache"
    config = tiny_config(table, root, modalities=("rgb",), overrides=AUDIO)
    config.run.max_reject_fraction = 0.9
    build_quietly(config)
    return root


def stored(root) -> dict[str, tuple[dict, np.ndarray, np.ndarray, np.ndarray]]:
    """sample_id -> (manifest row, audio, audio_span, audio_length) read with h5py."""
    found = {}
    for row in read_manifest(root):
        with h5py.File(root / row["shard_path"]) as shard:
            found[row["sample_id"]] = (row, *(shard[name][row["cache_row"]] for name in
                                              ("audio", "audio_span", "audio_length")))
    return found


def test_a_tone_is_stored_at_its_time_beside_the_frames(padded, world):
    rows = stored(padded)
    row, audio, span, length = rows["tone"]
    assert audio.dtype == np.float32 and audio.shape == (WINDOW, 1) and length.tolist() == [WINDOW]
    start, reference = pyav_samples(world[2]["tone"])
    assert row["provenance"]["timestamps"][0] == start == 0.0
    assert np.array_equal(audio[:, 0], reference[:WINDOW].astype(np.float32))  # same rate and layout: exact
    assert np.flatnonzero(audio[:, 0])[0] == round(0.2 * RATE) + 1  # sin(0) = 0 at the onset sample itself
    assert span.tolist() == [0.0, WINDOW / RATE]
    assert row["provenance"]["audio"] == {"present": True, "start_s": 0.0, "end_s": WINDOW / RATE,
                                          "samples": WINDOW}
    # resampled (48 kHz stereo -> 16 kHz mono): the onset within one output sample
    audio48 = rows["loud48k"][1][:, 0]
    onset = np.flatnonzero(np.abs(audio48) > 0.02)[0]
    assert abs(onset - 0.25 * RATE) <= 1 + 0.02 / (2 * np.pi * 440 * 0.5) * RATE


def test_late_audio_is_placed_by_its_time_and_the_rest_is_silence(padded, world):
    row, audio, span, _ = stored(padded)["late"]
    start, reference = pyav_samples(world[2]["late"])
    assert start == pytest.approx(0.1)
    offset = round(0.1 * RATE)
    assert not audio[:offset].any()
    assert np.array_equal(audio[offset:, 0], reference[:WINDOW - offset].astype(np.float32))
    assert span.tolist() == [offset / RATE, WINDOW / RATE]
    assert row["provenance"]["audio"]["start_s"] == pytest.approx(0.1)
    table = pq.read_table(padded / "manifest.parquet").to_pydict()
    at = table["sample_id"].index("late")
    assert table["audio_present"][at] and table["audio_start_s"][at] == pytest.approx(0.1)


def test_a_clip_without_audio_gets_silence_and_a_flag_and_a_broken_one_is_rejected(padded):
    row, audio, span, length = stored(padded)["silent"]
    assert audio.shape == (WINDOW, 1) and not audio.any() and span.tolist() == [0.0, 0.0]
    assert row["provenance"]["audio"] == {"present": False, "start_s": None, "end_s": None, "samples": WINDOW}
    rejects = [json.loads(line) for line in (padded / "rejects.jsonl").read_text().splitlines()]
    assert [(r["sample_id"], r["reason"]) for r in rejects] == [("broken", "audio_decode_error")]
    assert "cannot be decoded at 0.000 s" in rejects[0]["detail"]
    config = json.loads((padded / "cache_config.json").read_text())["audio"]
    assert (config["sample_rate"], config["channels"], config["samples"]) == (RATE, 1, WINDOW)
    assert config["resampler"]["resampler"] == "swr"
    items = {item["sample_id"]: item for item in LatentCacheDataset(padded)}
    assert not items["silent"]["audio_present"] and items["tone"]["audio_present"]
    assert tuple(items["tone"]["audio"].shape) == (WINDOW, 1)
    report = verify(str(padded), deep=True)
    assert report.ok and any(check.name == "audio" and check.ok for check in report.checks)


def test_partial_reject_and_the_streaming_dataset(world, tmp_path):
    folder, _, clips = world
    rows = [{"id": name, "video": str(clips[name]), "caption": name, "objects": 1} for name in ("tone", "late")]
    table = write_table(rows, tmp_path / "two.csv")
    config = tiny_config(table, tmp_path / "cache", modalities=("rgb",),
                         overrides=(*AUDIO, "audio.partial=reject", "output.sink=webdataset"))
    config.run.max_reject_fraction = 0.9
    build_quietly(config)
    rejects = [json.loads(line) for line in (tmp_path / "cache" / "rejects.jsonl").read_text().splitlines()]
    assert [(r["sample_id"], r["reason"]) for r in rejects] == [("late", "audio_partial")]
    assert "audio covers 0.100..0.375 s" in rejects[0]["detail"]
    [item] = list(StreamingLatentDataset(tmp_path / "cache"))
    assert item["sample_id"] == "tone" and bool(item["audio_present"]) and tuple(item["audio"].shape) == (WINDOW, 1)


def test_audio_at_the_source_rate_needs_a_longest_window(world, tmp_path):
    _, table, _ = world
    with pytest.raises(ConfigError, match="audio.max_seconds"):
        tiny_config(table, tmp_path / "cache", modalities=("rgb",), overrides=("audio.enabled=true",))


def test_at_the_source_rate_each_window_keeps_its_own_length(world, tmp_path):
    _, _, clips = world
    table = write_table([{"id": "tone", "video": str(clips["tone"]), "caption": "tone", "objects": 1}],
                        tmp_path / "one.csv")
    config = tiny_config(table, tmp_path / "cache", modalities=("rgb",),
                         overrides=("audio.enabled=true", "audio.max_seconds=0.5"))
    build_quietly(config)
    row, audio, span, length = stored(tmp_path / "cache")["tone"]
    times = row["provenance"]["timestamps"]
    own = round((times[-1] + 1 / FPS - times[0]) * RATE)  # up to the next frame's time: 9 frames at 24 fps
    assert audio.shape == (8000, 1) and length.tolist() == [own] == [WINDOW]
    assert audio[:own].any() and not audio[own:].any() and span.tolist() == [0.0, own / RATE]
    assert "audio  float32  [N, 8000, 1]" in (tmp_path / "cache" / "README.md").read_text()


def test_stats_reports_the_audio_coverage(padded, tmp_path):
    from latentforge import stats

    rows = read_manifest(padded)
    records = [row["provenance"]["audio"] for row in rows]
    covered = [(r["end_s"] - r["start_s"]) * RATE / r["samples"] if r["present"] else 0.0 for r in records]
    report = stats(padded, tmp_path / "stats")
    audio = json.loads((tmp_path / "stats" / "stats.json").read_text())["audio"]
    assert audio["samples"] == len(rows) == 4
    assert audio["with_audio"] == pytest.approx(3 / 4)  # tone, late, loud48k; silent has none
    assert audio["mean_covered"] == pytest.approx(sum(covered) / 4)
    assert 0.5 < audio["mean_covered"] < 0.75  # late covers 0.1..0.375 s of its 0.375 s
    assert "75.0% of samples have audio" in report.html.read_text()
