"""Deep verify of a bucketed root: every bucket is re-encoded on its own spot samples and one report (and one
exit code) covers them all; a latent changed in one bucket (its sums rewritten, so integrity passes) fails that
bucket's re-encode only. Stored values are read with h5py, spot positions recomputed with numpy."""

from __future__ import annotations

import json
import shutil

import h5py
import numpy as np
import pytest

from helpers.bucket_world import BUCKETS
from latentforge.cache.checksums import write_bucketed_sha256sums, write_sha256sums
from latentforge.cache.config_file import CacheConfig
from latentforge.cli.main import main
from latentforge.verification.entry import verify

DEEP_CHECKS = {"tokenizer", "sources", "provenance", "reencode", "latent_frame0", "quality", "text_encoder",
               "text_reencode"}


def _spread(count: int, spot: int) -> list[int]:
    return sorted({int(i) for i in np.linspace(0, count - 1, min(spot, count)).round()})


def test_every_bucket_is_deep_verified_in_one_report(bucketed_cache, tmp_path):
    report = verify(bucketed_cache, deep=True, spot=2, report_path=tmp_path / "report.json")
    assert report.ok, report.failures
    sizes = {e["name"]: e["num_samples"] for e in json.loads((bucketed_cache / "buckets.json").read_text())["buckets"]}
    assert set(report.buckets) == set(BUCKETS)
    assert report.spot == {name: _spread(size, 2) for name, size in sizes.items()}
    assert {c.name for c in report.checks} == {f"{b}/{c}" for b in BUCKETS for c in DEEP_CHECKS}
    assert {q.modality for q in report.quality} == {f"{b}/rgb" for b in BUCKETS}
    assert any(c.name == "17x48x48/sha256sums" for c in report.integrity.checks)
    written = json.loads((tmp_path / "report.json").read_text())
    assert written["ok"] and set(written["buckets"]) == set(BUCKETS)
    assert written["buckets"]["17x48x48"]["spot"] == [0, 2]


def test_a_changed_latent_in_one_bucket_fails_that_bucket_and_the_exit_code(bucketed_cache, tmp_path, capsys):
    root = tmp_path / "copy"
    shutil.copytree(bucketed_cache, root)
    bucket = root / "buckets" / "17x48x48"
    row = [json.loads(line) for line in (bucket / "manifest.jsonl").read_text().splitlines()][2]
    with h5py.File(bucket / row["shard_path"], "r+") as shard:
        latent = shard[CacheConfig.load(bucket).latent.dataset]
        latent[row["cache_row"], 0, 0, 0, 0] = latent[row["cache_row"], 0, 0, 0, 0] + np.float16(0.5)
    write_sha256sums(bucket)  # as a buggy build would, after the damage: integrity alone cannot see it
    write_bucketed_sha256sums(root)
    assert verify(root).ok

    code = main(["verify", str(root), "--deep", "--spot", "3", "--report", str(tmp_path / "r.json")])
    assert code == 1
    printed = capsys.readouterr().out
    assert "17x48x48/reencode" in printed and "17x48x48/rgb" in printed  # the check, and the quality table
    assert "below PSNR 25" not in printed  # quality warnings show in the quality table, not as warnings
    report = json.loads((tmp_path / "r.json").read_text())
    failed = {(name, c["name"], c["dataset_index"]) for name, part in report["buckets"].items()
              for c in part["deep"] if not c["ok"]}
    assert ("17x48x48", "reencode", 2) in failed and {name for name, _, _ in failed} == {"17x48x48"}


def test_index_on_a_bucketed_root_is_refused(bucketed_cache, tmp_path):
    assert main(["verify", str(bucketed_cache), "--deep", "--index", "0", "--report", str(tmp_path / "r.json")]) == 2
    with pytest.raises(Exception, match="--index is ambiguous"):
        verify(bucketed_cache, deep=True, indices=[0])
