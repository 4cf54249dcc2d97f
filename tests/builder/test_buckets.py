"""Bucketed builds: quirky clips land in the bucket that keeps the most of their picture and frames, each bucket
is a complete cache, the root verifies as a whole and with `sha256sum -c`, and a resume after a kill between
buckets ends in the same bytes. The expected buckets are recomputed here from the clips' sizes."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers.bucket_world import BUCKETS, CLIPS, bucket_config
from helpers.builds import checksummed_bytes, read_manifest
from latentforge.builder.run import build
from latentforge.dataset import LatentCacheDataset
from latentforge.errors import ConfigError, NotACache
from latentforge.testing import fault_points
from latentforge.testing.fault_points import FAULT_ENV, InjectedFault
from latentforge.verification.entry import verify


def _share(bucket: list[int], width: int, height: int) -> float:
    ratio = (bucket[2] / bucket[1]) / (width / height)
    return min(ratio, 1 / ratio)


def _rows_by_id(root: Path) -> dict[str, tuple[str, dict]]:
    index = json.loads((root / "buckets.json").read_text())
    return {row["sample_id"]: (entry["name"], row) for entry in index["buckets"] if entry["path"]
            for row in read_manifest(root / entry["path"])}


def test_quirky_clips_land_in_the_bucket_that_keeps_most(bucketed_cache):
    rows = _rows_by_id(bucketed_cache)
    for clip, (width, height, frames, rotation, expected) in CLIPS.items():
        if expected is None:
            assert clip not in rows
            continue
        name, row = rows[clip]
        assert name == expected == row["provenance"]["bucket"]["name"], clip
        assert "picture" in row["provenance"]["bucket"]["reason"]
        shown_w, shown_h = (height, width) if rotation in (90, 270) else (width, height)
        fitting = [b for b in BUCKETS.values() if b[1] <= shown_h and b[2] <= shown_w and b[0] <= frames]
        x0, y0, x1, y1 = row["provenance"]["crop_box"]
        kept = (x1 - x0) * (y1 - y0) / (shown_w * shown_h)
        assert kept == pytest.approx(max(_share(b, shown_w, shown_h) for b in fitting), abs=1e-4), clip
        assert len(row["provenance"]["frame_indices"]) == BUCKETS[name][0]
    rejects = [json.loads(line) for line in (bucketed_cache / "rejects.jsonl").read_text().splitlines()]
    assert [(r["sample_id"], r["reason"]) for r in rejects] == [("tiny", "no_bucket")]
    assert "24x16" in rejects[0]["detail"] and "bucket_upscale" in rejects[0]["detail"]


def test_each_bucket_is_a_dense_cache_and_the_root_verifies(bucketed_cache):
    index = json.loads((bucketed_cache / "buckets.json").read_text())
    assert sum(entry["num_samples"] for entry in index["buckets"]) == index["num_samples"] == 8
    for entry in index["buckets"]:
        bucket = bucketed_cache / entry["path"]
        assert [r["dataset_index"] for r in read_manifest(bucket)] == list(range(entry["num_samples"]))
        config = json.loads((bucket / "cache_config.json").read_text())
        assert [config["frames"][k] for k in ("num_frames", "height", "width")] == BUCKETS[entry["name"]]
        assert "buckets" not in config["frames"]
        assert verify(bucket).ok
        done = subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=bucket, capture_output=True)
        assert done.returncode == 0, done.stdout
    done = subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=bucketed_cache, capture_output=True)
    assert done.returncode == 0, done.stdout
    listed = (bucketed_cache / "SHA256SUMS").read_text()
    assert "buckets/17x48x48/shards/" in listed and "/build/" not in listed and "_CACHE_COMPLETE" not in listed
    report = verify(bucketed_cache)
    assert report.ok, [c for c in report.failures]
    assert any(c.name == "9x32x64/sha256sums" for c in report.checks)
    with pytest.raises(ConfigError, match="BucketedLatentDataset"):
        LatentCacheDataset(bucketed_cache)


def test_tampering_and_missing_root_marker_fail_verify(bucketed_cache, tmp_path):
    root = tmp_path / "copy"
    shutil.copytree(bucketed_cache, root)
    (root / "_CACHE_COMPLETE").unlink()
    assert [c.name for c in verify(root).failures] == ["markers"]
    shard = next((root / "buckets" / "17x64x32" / "shards").iterdir())
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    names = {c.name for c in verify(root, require_complete=False).failures}
    assert {"sha256sums", "17x64x32/sha256sums"} <= names


def test_resume_after_a_kill_between_buckets_gives_the_same_bytes(bucketed_cache, bucket_inputs, tmp_path,
                                                                  monkeypatch):
    root = tmp_path / "resumed"
    # A fault in the second bucket's commit, right after its manifest: the first bucket is complete, the second has its
    # units staged and its commit cut short, the third has nothing, and the root has no index, sums or marker.
    monkeypatch.setenv(FAULT_ENV, "manifest:2:raise")
    monkeypatch.setattr(fault_points, "_arrivals", {})
    with pytest.raises(InjectedFault):
        build(bucket_config(*bucket_inputs, root), quiet=True)
    monkeypatch.delenv(FAULT_ENV)
    first, second, third = (root / "buckets" / name for name in ("17x32x64", "17x64x32", "17x48x48"))
    assert (first / "_CACHE_COMPLETE").is_file() and not (second / "_CACHE_COMPLETE").exists()
    assert list((second / "build" / "staging").glob("unit-*.h5")) and not (third / "cache_config.json").exists()
    with pytest.raises(NotACache, match="is not a latentforge cache yet: it holds an unfinished build"):
        verify(root)
    build(bucket_config(*bucket_inputs, root), quiet=True)
    assert checksummed_bytes(root) == checksummed_bytes(bucketed_cache)
    assert verify(root).ok


@pytest.mark.parametrize("buckets, message", [
    ([[16, 32, 64]], r"frames.buckets\[0\] 16x32x64: num_frames=16"),
    ([[17, 30, 64]], r"frames.buckets\[0\] 17x30x64: height=30"),
    ([[17, 32, 64], [17, 32, 64]], "listed twice"),
    ([[17, 32]], r"\[num_frames, height, width\]"),
])
def test_bad_buckets_are_config_errors(bucket_inputs, tmp_path, buckets, message):
    with pytest.raises(ConfigError, match=message):
        bucket_config(*bucket_inputs, tmp_path / "c", (f"frames.buckets={json.dumps(buckets)}",))


def test_buckets_refuse_every_n_windows(bucket_inputs, tmp_path):
    with pytest.raises(ConfigError, match="frames.windows=one with buckets"):
        bucket_config(*bucket_inputs, tmp_path / "c", ("frames.windows=every 8",))
