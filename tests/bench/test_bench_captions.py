"""bench/build/captions.py --tiny: the captioner timed at two batch sizes (every caption exactly the bench's length,
which the script checks), then the same build with the listing's captions and with captions generated."""

from __future__ import annotations

import pytest

from helpers.bench_scripts import run_tiny

pytestmark = pytest.mark.slow  # two latentforge processes


def test_captions_bench_runs_tiny(tmp_path):
    report = run_tiny("build/captions", tmp_path, "--work", str(tmp_path / "work"))
    assert [row["batch"] for row in report["generate"]] == [1, 2]
    assert all(row["captions_per_s"] > 0 and row["tokens_per_s"] == pytest.approx(8 * row["captions_per_s"])
               for row in report["generate"])
    keep, generated = report["builds"]["keep"], report["builds"]["generate_all"]
    assert keep["samples"] == generated["samples"] == 4
    assert "captions" not in keep["stage_seconds"] and generated["stage_seconds"]["captions"] > 0
