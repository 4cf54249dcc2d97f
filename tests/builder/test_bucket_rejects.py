"""run.max_reject_fraction across buckets: rejects of every bucket, found while decoding, count together against
every candidate of the build; a bucket whose every sample fails at decode leaves an empty bucket cache and a root
that still verifies, reads and takes statistics. Decode failures are injected by wrapping the real PyAV decoder
for chosen clips (the build runs in this process: one CPU slot, no decode workers)."""

from __future__ import annotations

import json
import subprocess

import pytest

from helpers.bucket_world import CLIPS, bucket_config
from latentforge.builder.run import build
from latentforge.dataset import BucketedLatentDataset
from latentforge.errors import LatentforgeError, SampleRejected
from latentforge.pipeline import sample as sample_module
from latentforge.report.stats_report import stats
from latentforge.verification.entry import verify

PORTRAITS = {"portrait", "portrait_rotated"}  # every sample of bucket 17x64x32


def _fail_decode(monkeypatch, ids: set[str]) -> None:
    real = sample_module.decode_rgb

    def decode_rgb(video, info, indices, plan, frames, sample_id, **options):
        if sample_id in ids:
            raise SampleRejected("decode_error", sample_id, f"{video}: injected decode failure")
        return real(video, info, indices, plan, frames, sample_id, **options)

    monkeypatch.setattr(sample_module, "decode_rgb", decode_rgb)


def _rejects(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_rejects_of_several_buckets_add_up_against_the_limit(bucket_inputs, tmp_path, monkeypatch):
    # tiny (no_bucket), both clips of the first bucket and one of the second: 4 of 9 > 0.4, though the root's
    # reject with either bucket's own stays within it; the second bucket stops the build
    _fail_decode(monkeypatch, {"landscape", "landscape_long", "portrait"})
    root = tmp_path / "cache"
    with pytest.raises(LatentforgeError) as error:
        build(bucket_config(*bucket_inputs, root, ("run.max_reject_fraction=0.4",)), quiet=True)
    message = str(error.value)
    assert f"4 of {len(CLIPS)} samples were rejected" in message and "decode_error x3" in message, message
    assert not (root / "_CACHE_COMPLETE").exists() and not (root / "buckets.json").exists()
    assert not (root / "buckets" / "17x64x32" / "_CACHE_COMPLETE").exists()
    assert not (root / "buckets" / "17x48x48").exists()


def test_a_bucket_whose_samples_all_fail_at_decode(bucket_inputs, tmp_path, monkeypatch):
    _fail_decode(monkeypatch, PORTRAITS)
    root = tmp_path / "cache"
    result = build(bucket_config(*bucket_inputs, root), quiet=True)
    assert result.rejects_by_reason == {"decode_error": 2, "no_bucket": 1}
    assert result.num_samples == len(CLIPS) - 3
    index = json.loads((root / "buckets.json").read_text())
    counts = {entry["name"]: entry["num_samples"] for entry in index["buckets"]}
    assert counts["17x64x32"] == 0 and sum(counts.values()) == result.num_samples
    empty = root / "buckets" / "17x64x32"
    assert {r["sample_id"]: r["reason"] for r in _rejects(empty / "rejects.jsonl")} == dict.fromkeys(PORTRAITS,
                                                                                                    "decode_error")
    report = verify(root)
    assert report.ok, report.failures
    done = subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=root, capture_output=True)
    assert done.returncode == 0, done.stdout
    assert set(stats(root, tmp_path / "stats").buckets) == {name for name, count in counts.items() if count}
    assert len(BucketedLatentDataset(root)) == result.num_samples
