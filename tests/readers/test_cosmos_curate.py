"""The cosmos_curate reader on a folder laid out as Cosmos-Curate's split pipeline writes it: `clips/<uuid>.mp4`
(PyAV writes them) and `metas/v0/<uuid>.json` with the clip's captioned windows (end_frame is the window's last
frame). A cache built from it, the bad metadata rejected by clip, and the caption source chosen by key."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from helpers.media import pattern_frames, write_video
from latentforge import registry
from latentforge.config import DatasetConfig
from latentforge.config.loading.reader_choice import choose_reader
from latentforge.errors import ConfigError
from latentforge.readers.cosmos_curate import CosmosCurateOptions, CosmosCurateReader

CLIP_A, CLIP_B, CLIP_BROKEN, CLIP_NO_META, CLIP_FILTERED = (
    str(uuid.uuid5(uuid.NAMESPACE_URL, f"/videos/drive.mp4_{k}")) for k in range(5))


def _meta(clip: str, windows: list[dict], folder: str = "clips") -> dict:
    """A clip's metadata with the keys Cosmos-Curate's clip writer gives it."""
    return {"span_uuid": clip, "source_video": "/data/videos/drive.mp4", "duration_span": [2.0, 3.25],
            "width_source": 48, "height_source": 32, "framerate_source": 24.0,
            "clip_location": f"/out/{folder}/{clip}.mp4", "motion_score": {"global_mean": 3.1,
                                                                            "per_patch_min_256": 0.4},
            "aesthetic_score": 4.2, "windows": windows, "filtered_windows": [], "valid": True}


def curate_folder(root: Path) -> Path:
    (root / "clips").mkdir(parents=True)
    (root / "metas" / "v0").mkdir(parents=True)
    for seed, (clip, frames) in enumerate(((CLIP_A, 30), (CLIP_B, 12), (CLIP_BROKEN, 12), (CLIP_NO_META, 12))):
        write_video(root / "clips" / f"{clip}.mp4", pattern_frames(frames, 48, 32, seed=seed))
    metas = {
        CLIP_A: _meta(CLIP_A, [{"start_frame": 0, "end_frame": 14, "qwen_caption": " a car leaves the garage "},
                               {"start_frame": 15, "end_frame": 29, "qwen_caption": "the car turns left"}]),
        CLIP_B: _meta(CLIP_B, [{"start_frame": 0, "end_frame": 11, "qwen_caption": "a parked car"}]),
        CLIP_FILTERED: _meta(CLIP_FILTERED, [{"start_frame": 0, "end_frame": 11, "qwen_caption": "still"}],
                             folder="filtered_clips"),
    }
    for clip, meta in metas.items():
        (root / "metas" / "v0" / f"{clip}.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
    (root / "metas" / "v0" / f"{CLIP_BROKEN}.json").write_text('{"windows": [', encoding="utf-8")
    return root


def _reader(root: Path, **keys) -> CosmosCurateReader:
    return CosmosCurateReader(DatasetConfig(reader="cosmos_curate", path=[str(root)],
                                            options=CosmosCurateOptions(**keys)))


def test_auto_claims_the_split_output_and_leaves_cosmos_folders_to_cosmos_dir(tmp_path):
    assert registry.resolve("reader", "cosmos_curate") is CosmosCurateReader
    assert choose_reader([str(curate_folder(tmp_path / "curate"))]) == "cosmos_curate"
    (tmp_path / "predict" / "videos").mkdir(parents=True)
    (tmp_path / "predict" / "metas").mkdir()
    assert choose_reader([str(tmp_path / "predict")]) == "cosmos_dir"


def test_each_window_is_an_entry_with_its_segment_and_caption_and_bad_clips_are_rejected(tmp_path):
    reader = _reader(curate_folder(tmp_path / "curate"))
    entries = {e.key: e for e in reader.entries()}
    assert sorted(entries) == sorted([f"{CLIP_A}_0_14", f"{CLIP_A}_15_29", f"{CLIP_B}_0_11"])
    second = entries[f"{CLIP_A}_15_29"]
    assert second.caption == "the car turns left" and second.video_rel == f"clips/{CLIP_A}.mp4"
    assert second.segment == {"start": 15, "end": 30, "unit": "frames"}  # end_frame is the window's last frame
    assert second.extra == {"source_video": "/data/videos/drive.mp4", "source_span": [2.0, 3.25]}
    assert entries[f"{CLIP_A}_0_14"].caption == "a car leaves the garage"
    rejects = {r.sample_id: r for r in reader.rejects}
    assert set(rejects) == {CLIP_BROKEN, CLIP_NO_META}  # the filtered clip is left out, as Cosmos-Curate left it
    assert {r.reason for r in rejects.values()} == {"bad_clip_meta"}
    assert f"metas/v0/{CLIP_BROKEN}.json cannot be read as JSON" in rejects[CLIP_BROKEN].detail
    assert f"clips/{CLIP_NO_META}.mp4 has no metadata" in rejects[CLIP_NO_META].detail


def test_windows_that_are_not_frame_numbers_reject_their_clip(tmp_path):
    root = curate_folder(tmp_path / "curate")
    bad = _meta(CLIP_B, [{"start_frame": 0, "end_frame": 11, "qwen_caption": "x"},
                         {"start_frame": 9, "end_frame": 3, "qwen_caption": "y"}])
    (root / "metas" / "v0" / f"{CLIP_B}.json").write_text(json.dumps(bad), encoding="utf-8")
    reader = _reader(root)
    assert not [e for e in reader.entries() if e.key.startswith(CLIP_B)]
    detail = next(r.detail for r in reader.rejects if r.sample_id == CLIP_B)
    assert "window 1" in detail and "start_frame 9 and end_frame 3" in detail


def test_the_caption_source_is_chosen_by_key_when_windows_hold_several(tmp_path):
    root = curate_folder(tmp_path / "curate")
    meta = json.loads((root / "metas" / "v0" / f"{CLIP_B}.json").read_text())
    meta["windows"][0]["qwen_enhanced_caption"] = "a red car parked by a wall"
    (root / "metas" / "v0" / f"{CLIP_B}.json").write_text(json.dumps(meta), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"several sources \(qwen, qwen_enhanced\).*dataset.caption_source"):
        _reader(root).entries()
    entries = {e.key: e for e in _reader(root, caption_source="qwen_enhanced").entries()}
    assert entries[f"{CLIP_B}_0_11"].caption == "a red car parked by a wall"
    assert entries[f"{CLIP_A}_0_14"].caption is None  # the build's missing-caption policy decides
    with pytest.raises(ConfigError, match="no window has a `gemini_caption`"):
        _reader(root, caption_source="gemini").entries()
    with pytest.raises(ConfigError, match=r"no metas/v1/ folder.*it has: v0"):
        _reader(root, annotation_version="v1").entries()


def test_a_cache_built_from_the_split_output(tmp_path, cli):
    root, out = curate_folder(tmp_path / "curate"), tmp_path / "cache"
    done = cli(["build", "--dataset", str(root), "--out", str(out), "--tokenizer", "haar-4x8x8", "--text", "none",
                "--set", "frames.num_frames=9", "--set", "frames.height=32", "--set", "frames.width=48",
                "--set", "output.rows_per_shard=4", "--set", "output.min_free_bytes=0", "--max-reject-fraction", "1",
                "--quiet"])
    assert done.returncode == 0, done.stderr
    config = json.loads((out / "cache_config.json").read_text())
    assert config["dataset"]["reader"] == "cosmos_curate"
    manifest = {row["sample_id"]: row for row in map(json.loads, (out / "manifest.jsonl").read_text().splitlines())}
    assert sorted(manifest) == sorted([f"{CLIP_A}_0_14", f"{CLIP_A}_15_29", f"{CLIP_B}_0_11"])
    second = manifest[f"{CLIP_A}_15_29"]
    assert second["prompt"] == "the car turns left"
    assert second["provenance"]["frame_indices"] == list(range(15, 24))  # inside the window's frames 15..29
    assert manifest[f"{CLIP_A}_0_14"]["provenance"]["frame_indices"] == list(range(9))
    rejects = [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines()]
    assert sorted((r["sample_id"], r["reason"]) for r in rejects) == sorted(
        [(CLIP_BROKEN, "bad_clip_meta"), (CLIP_NO_META, "bad_clip_meta")])
