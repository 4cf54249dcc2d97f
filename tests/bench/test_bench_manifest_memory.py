"""bench/io/manifest_memory.py --tiny: every step (the commit's manifest step from staged units, verify, the Dataset
index and open, a whole synthetic commit) runs in a process of its own and reports its time and peak memory."""

from __future__ import annotations

import pytest

from helpers.bench_scripts import run_tiny

pytestmark = pytest.mark.slow  # seven processes, two of them importing torch


def test_manifest_memory_bench_runs_tiny(tmp_path):
    report = run_tiny("io/manifest_memory", tmp_path)
    steps = {r["step"]: r for r in report["results"]}
    assert set(steps) == {"stage", "commit_manifest", "verify_manifest", "index", "commit", "verify", "dataset"}
    assert all(r["rows"] == 300 and r["seconds"] > 0 and r["peak_mb"] >= r["base_mb"] > 0 for r in steps.values())
    assert steps["index"]["manifest_bytes_per_row"] > 100
