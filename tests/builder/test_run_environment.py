"""Every run records where it encoded (`environment` in build/stats-*.json), so deep verify of a fresh build on
the same machine compares latents bit for bit instead of within a tolerance (docs/verify.md)."""

from __future__ import annotations

import json
import platform

import torch

import latentforge
from helpers.builds import build_quietly, tiny_config, tiny_world, write_table
from latentforge.builder.run import build
from latentforge.verification.deep import verify_deep


def _cpu_model() -> str:
    """/proc/cpuinfo's model name, read here without latentforge."""
    with open("/proc/cpuinfo", encoding="utf-8") as handle:
        names = [line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")]
    return names[0] if names else platform.processor() or platform.machine()


def test_a_fresh_cpu_build_deep_verifies_with_the_exact_comparison(tmp_path):
    rows = tiny_world(tmp_path / "world", clips=3)
    config = tiny_config(write_table(rows, tmp_path / "world" / "samples.csv"), tmp_path / "cache")
    build_quietly(config)
    build(config, quiet=True)  # a rerun finds every unit staged: it encodes nothing and only commits
    runs = [json.loads(p.read_text()) for p in sorted((tmp_path / "cache" / "build").glob("stats-*.json"))]
    assert len(runs) == 2 and runs[0]["ranks"] and not runs[1]["ranks"]
    expected = {"device_type": "cpu", "device_name": _cpu_model(), "torch": torch.__version__,
                "latentforge": latentforge.__version__}
    assert [run["environment"] for run in runs] == [expected, expected]
    assert all(rank["environment"] == expected for rank in runs[0]["ranks"])

    report = verify_deep(tmp_path / "cache", spot=2)
    assert report.ok, report.failures
    assert report.comparison.startswith("exact (bit for bit after the storage cast)"), report.comparison
    written = json.loads((tmp_path / "cache" / "build" / "verify_report.json").read_text())
    assert written["comparison"] == report.comparison and written["environment"] == expected
