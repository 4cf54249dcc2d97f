"""`scan` on a bucketed config prints how many samples each bucket gets and writes nothing but its records (no
encoding); `inspect` on a bucketed root names every bucket's count, latent shape and folder. Expected counts come
from helpers.bucket_world's table of clips."""

from __future__ import annotations

import json
import shutil
from collections import Counter

import pytest
import yaml

from helpers.bucket_world import BUCKETS, CLIPS, bucket_settings
from latentforge.cli.main import main
from latentforge.dataset import BucketedLatentDataset
from latentforge.errors import CacheIntegrityError

EXPECTED = Counter(expected for *_, expected in CLIPS.values() if expected is not None)


def test_scan_prints_the_bucket_histogram_before_any_encoding(bucket_inputs, tmp_path, capsys):
    root = tmp_path / "cache"
    config = tmp_path / "buckets.yaml"
    config.write_text(yaml.safe_dump(bucket_settings(*bucket_inputs, root)))
    assert main(["scan", "--config", str(config), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "buckets " + ", ".join(f"{name} {EXPECTED[name]}" for name in BUCKETS) in printed, printed
    assert "rejected 1 (no_bucket 1)" in printed
    assert [p.name for p in root.iterdir()] == ["build"]  # no bucket folder, no staged unit
    [record] = (root / "build").glob("scan-*.json")
    assert json.loads(record.read_text())["buckets"] == {name: EXPECTED[name] for name in BUCKETS}


def test_inspect_lists_every_bucket(bucketed_cache, capsys):
    assert main(["inspect", str(bucketed_cache)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "8 samples in 4 bucket(s)" in lines[0] and "(no_bucket 1)" in lines[0], lines[0]
    for name in BUCKETS:
        [line] = [line for line in lines if line.split()[0] == name]
        assert f"{EXPECTED[name]} samples" in line and line.endswith(f"buckets/{name}"), line
    assert main(["inspect", str(bucketed_cache), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert {name: part["num_samples"] for name, part in summary["buckets"].items()} == EXPECTED


def test_a_damaged_bucket_is_refused_by_inspect_stats_and_the_dataset(bucketed_cache, tmp_path, cli):
    root = tmp_path / "cache"
    shutil.copytree(bucketed_cache, root)
    table = root / "buckets" / next(iter(BUCKETS)) / "manifest.parquet"
    table.write_bytes(table.read_bytes()[:100])
    for args in (["inspect", str(root)], ["stats", str(root), "--out", str(tmp_path / "stats")]):
        done = cli(args)
        assert done.returncode == 1 and done.stderr.strip().splitlines() == [done.stderr.strip()], done.stderr
        assert f"{table} is damaged" in done.stderr and "rebuild the cache, or fetch it again" in done.stderr
    with pytest.raises(CacheIntegrityError, match=f"{table} is damaged"):
        BucketedLatentDataset(root)
