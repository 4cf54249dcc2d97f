"""bench/build/scale.py --tiny: a fresh build, a rerun with nothing to do, an extend and a verify of 20 clips, each
timed as a process of its own."""

from __future__ import annotations

import pytest

from helpers.bench_scripts import run_tiny

pytestmark = pytest.mark.slow  # four latentforge processes


def test_scale_bench_runs_tiny(tmp_path):
    report = run_tiny("build/scale", tmp_path, "--work", str(tmp_path / "work"))
    run = report["runs"]["20"]
    assert set(run) == {"build", "rerun", "extend", "verify"}
    assert all(step["seconds"] > 0 and step["peak_rss_mb"] > 0 for step in run.values())
    assert run["extend"]["ms_per_existing_row"] > 0
