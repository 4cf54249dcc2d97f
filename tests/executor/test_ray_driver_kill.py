"""SIGKILL of a driver that started its own Ray: before the next build holds the lock, no process of the dead
build is left (its Ray daemons, agents, workers and their decode children), and nothing in the staging folder
changes after that build took the lock.

The first build's workers stall inside an encode (each holding a unit), so they would outlive the driver by
themselves; Ray's agents do too (tens of seconds). The next build is the same command on the local
executor with its decode stalled, so it holds the lock and writes nothing: any change in staging would come
from the dead build."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from helpers.exec_world import build_args, cli_command, cli_env, make_table
from helpers.processes import alive, descendants, wait_for
from latentforge.executor.lock_record import read_lock_record
from latentforge.staging.staged_units import completed_units

pytestmark = pytest.mark.slow


def _staged_files(staging: Path) -> dict[str, tuple[int, int]]:
    """name -> (size, mtime_ns) of the finished files (tmp files are the next build's to clean up)."""
    files = {}
    for path in staging.iterdir() if staging.is_dir() else []:
        if ".tmp" not in path.name:
            status = path.stat()
            files[path.name] = (status.st_size, status.st_mtime_ns)
    return files


def test_killed_driver_takes_its_ray_with_it_before_the_lock_is_taken(tmp_path):
    table = make_table(tmp_path / "world", count=24)
    root = tmp_path / "cache"
    build_dir, staging = root / "build", root / "build" / "staging"
    # every worker stalls in the encode after its first unit: the driver's Ray inherits its environment, and
    # Ray may start either rank first
    env = cli_env(LATENTFORGE_FAULT="encode:3:sleep")
    env.pop("RAY_ADDRESS", None)
    stderr, second_err = open(tmp_path / "first.txt", "w"), open(tmp_path / "second.txt", "w")
    first = subprocess.Popen(cli_command(build_args(table, root, "--executor", "ray", "--procs", "2",
                                                    "--workers-per-gpu", "1")),
                             env=env, stdout=subprocess.DEVNULL, stderr=stderr)
    second = None
    try:
        assert wait_for(lambda: len(completed_units(build_dir)) >= 2 or first.poll() is not None, timeout=180), \
            (tmp_path / "first.txt").read_text()
        assert first.poll() is None, "the first build ended before it could be killed"
        old = read_lock_record(build_dir)
        family = descendants(first.pid)  # its Ray: GCS, raylet, agents, workers, decode children
        assert old is not None and old.pid == first.pid and len(family) >= 4
        os.kill(first.pid, signal.SIGKILL)
        first.wait()

        second = subprocess.Popen(cli_command(build_args(table, root, "--procs", "1", "--workers-per-gpu", "0")),
                                  env=cli_env(LATENTFORGE_FAULT="decode:1:sleep"), stdout=subprocess.DEVNULL,
                                  stderr=second_err)
        holds = lambda: (r := read_lock_record(build_dir)) is not None and r.pid == second.pid  # noqa: E731
        assert wait_for(holds, timeout=120), "the next build never took the lock"
        taken = (build_dir / "lock").stat().st_mtime_ns
        left = alive(family)
        at_lock = _staged_files(staging)
        assert not left, f"processes {sorted(left)} of the killed build outlived it into the next build's lock"
        assert at_lock and all(mtime <= taken for _, mtime in at_lock.values())
        stalled = lambda: "stalls at decode" in (tmp_path / "second.txt").read_text()  # noqa: E731
        assert wait_for(lambda: stalled() or second.poll() is not None, timeout=120) and second.poll() is None, \
            (tmp_path / "second.txt").read_text()
        assert _staged_files(staging) == at_lock  # the next build is stalled: nothing may have written since
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
        stderr.close()
        second_err.close()
