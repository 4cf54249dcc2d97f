"""The local executor: the output does not depend on processes or decode workers; every rank encodes. The build
with one rank and no decode workers is tests/conftest.py's `kill_world` (the 24 clips built once per test run)."""

from __future__ import annotations

import json
import subprocess

import pytest

from helpers.exec_world import build_args, sums


def _stats(root):
    return [json.loads(p.read_text()) for p in sorted((root / "build").glob("stats-*.json"))]


@pytest.mark.slow
def test_procs_and_workers_do_not_change_sha256sums(kill_world, tmp_path, cli):
    table, p1w0 = kill_world  # --procs 1 --workers-per-gpu 0
    runs = {"p3w1": ("--procs", "3", "--workers-per-gpu", "1"), "p1w2": ("--procs", "1", "--workers-per-gpu", "2")}
    for name, flags in runs.items():
        done = cli(build_args(table, tmp_path / name, *flags))  # main() here; ranks and workers are spawned
        assert done.returncode == 0, done.stderr
    assert p1w0 == sums(tmp_path / "p3w1") == sums(tmp_path / "p1w2")
    # sha256sum, not our code, confirms the listing
    check = subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=tmp_path / "p3w1", capture_output=True)
    assert check.returncode == 0, check.stdout
    [stats] = _stats(tmp_path / "p3w1")
    assert stats["outcome"] == "complete"
    assert len(stats["ranks"]) == 3 and all(r["samples"] > 0 for r in stats["ranks"]), stats["ranks"]
    assert sum(r["samples"] for r in stats["ranks"]) == 24
    assert len({r["pid"] for r in stats["ranks"]}) == 3
    for key in ("decode", "encode", "stage", "probe", "commit"):
        assert stats["stage_seconds_per_sample"][key] > 0, key
    assert stats["cpu_core_seconds"] > 0 and all(r["peak_host_bytes"] > 0 for r in stats["ranks"])
