"""Every unit records where it was encoded (`encoded_by` in cache_config.json, and each run's build/stats-*.json),
so deep verify on the same machine compares latents bit for bit instead of within a tolerance (docs/verify.md),
also for a cache fetched without its build/ records. On the CPU the record names the vector width torch's kernels
use, which changes float bits as much as another CPU does."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys

import pytest
import torch

import latentforge
from helpers import SRC
from helpers.builds import build_quietly, tiny_config, tiny_world, write_table
from latentforge.builder.run import build
from latentforge.verification.deep import verify_deep
from latentforge.verification.reencode import Overrides


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
    expected = {"device_type": "cpu", "device_name": _cpu_model(),
                "cpu_capability": torch.backends.cpu.get_cpu_capability(), "torch": torch.__version__,
                "latentforge": latentforge.__version__}
    assert [run["environment"] for run in runs] == [expected, expected]
    assert all(rank["environment"] == expected for rank in runs[0]["ranks"])

    cache_config = json.loads((tmp_path / "cache" / "cache_config.json").read_text())
    assert [group["environment"] for group in cache_config["encoded_by"]] == [expected]
    assert [group["units"] for group in cache_config["encoded_by"]] == [[[0, 1]]]

    report = verify_deep(tmp_path / "cache", spot=2)
    assert report.ok, report.failures
    assert report.comparison.startswith("exact (bit for bit after the storage cast)"), report.comparison
    written = json.loads((tmp_path / "cache" / "build" / "verify_report.json").read_text())
    assert written["comparison"] == report.comparison and written["environment"] == expected

    shutil.rmtree(tmp_path / "cache" / "build")  # as fetched: no run records, the dataset given again
    report = verify_deep(tmp_path / "cache", spot=2, overrides=Overrides(dataset=tuple(config.dataset.path)),
                         report_path=tmp_path / "report.json")
    assert report.ok and report.comparison.startswith("exact"), (report.failures, report.comparison)


def test_another_vector_width_is_another_environment(built_cache, tmp_path):
    """The same CPU with torch's kernels pinned to another width (ATEN_CPU_CAPABILITY) rounds otherwise: deep
    verify there compares within the tolerance and names the width, instead of expecting the build's bits."""
    here = torch.backends.cpu.get_cpu_capability()
    if here == "DEFAULT":
        pytest.skip("torch runs its DEFAULT kernels on this CPU already: there is no other width to pin")
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default",
           "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "latentforge.cli.main", "verify", str(built_cache), "--deep",
                           "--spot", "1", "--report", str(report)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    comparison = json.loads(report.read_text())["comparison"]
    assert comparison.startswith("rel-L2 <=") and f"cpu_capability '{here}' -> 'DEFAULT'" in comparison
