"""bench/io/plan_memory.py --tiny: the plan and the probe results of real clips measured in the process that gathers
them, for one window per short clip and for windows every 16 frames of one long video."""

from __future__ import annotations

from helpers.bench_scripts import run_tiny


def test_plan_memory_bench_runs_tiny(tmp_path):
    report = run_tiny("io/plan_memory", tmp_path, "--work", str(tmp_path / "work"))
    rows = report["rows"]
    assert rows["short"]["samples"] == 4  # one 93-frame window per 150-frame clip
    assert rows["long"]["samples"] == 17  # starts 0, 16, ..., 256 of a 360-frame video
    for row in rows.values():
        # a window's results hold at least its 93 frame indices and times
        assert row["probe_B"] > 93 * 16 and row["record_B"] > 93 * 16 and row["plan_B"] > 0
