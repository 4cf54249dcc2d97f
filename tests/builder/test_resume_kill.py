"""Kill-proof builds: SIGKILL inside every phase and at random moments, torn staged files, SIGTERM,
and no process outliving a killed main process. Every resume must end in the uninterrupted SHA256SUMS.

The builds that are killed or signalled run in their own process; the resumes, which only have to finish, run
the CLI's main() in this process (tests/conftest.py's `cli`). The reference is tests/conftest.py's `kill_world`:
the same 24 clips built once per test run (tests/executor/test_local_executor.py compares with it too)."""

from __future__ import annotations

import random
import signal
import subprocess
import time
from pathlib import Path

import h5py
import pytest

from helpers.exec_world import build_args, cli_command, cli_env, run_cli, sums
from helpers.processes import alive, descendants, wait_for
from latentforge.staging.staged_units import completed_units

pytestmark = pytest.mark.slow  # a long end-to-end run; -m 'not slow' leaves it out

# phase -> arrival to kill at; chosen so each kill happens after some units are staged
# The staging writer holds one unit queued behind the one it writes, so units reach the disk a little after the
# encoder hands them over: by the 9th sample's decode or encode (units of 2) units 0-3 were handed over, so 0 and 1
# are on disk whatever the load. Earlier kills raced the writer on a loaded machine.
PHASE_KILLS = (("decode", 9), ("encode", 9), ("stage", 2), ("commit", 2), ("manifest", 1), ("sha256sums", 1),
               ("marker", 1))


def _staged(root: Path) -> list[Path]:
    return sorted((root / "build" / "staging").glob("unit-*.h5")) if (root / "build" / "staging").is_dir() else []


def test_kill_inside_every_phase_then_resume(kill_world, tmp_path, cli):
    table, reference = kill_world
    root = tmp_path / "cache"
    args = build_args(table, root, "--workers-per-gpu", "0")
    for phase, arrival in PHASE_KILLS:
        done = run_cli(args, LATENTFORGE_FAULT=f"{phase}:{arrival}")
        assert done.returncode == -signal.SIGKILL, (phase, done.returncode, done.stderr)
        assert completed_units(root / "build"), f"{phase}: no staged unit on disk at the kill"
        assert not (root / "_CACHE_COMPLETE").exists(), phase
        if phase == "stage":
            staging = root / "build" / "staging"
            assert any(p.name.startswith(".unit-") for p in staging.iterdir()), "the kill was not inside a write"
            for path in _staged(root):  # tmp + rename: a final name only ever holds a complete file
                with h5py.File(path, "r") as handle:
                    assert "rows_jsonl" in handle, path
    done = cli(args)
    assert done.returncode == 0, done.stderr
    assert sums(root) == reference
    assert not [p for p in (root / "build" / "staging").iterdir() if ".tmp" in p.name]


def test_kill_at_random_moments_then_resume(kill_world, tmp_path, cli):
    table, reference = kill_world
    root = tmp_path / "cache"
    rng = random.Random(5)
    for attempt in range(6):
        flags = ("--procs", "2", "--workers-per-gpu", "1") if attempt % 3 == 0 else ("--workers-per-gpu", "0")
        process = subprocess.Popen(cli_command(build_args(table, root, *flags)), env=cli_env(),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            process.wait(rng.uniform(1.0, 5.0))  # inside a build: an uninterrupted one takes ~5 s here
        except subprocess.TimeoutExpired:
            family = descendants(process.pid)
            process.send_signal(signal.SIGKILL)
            process.wait()
            assert wait_for(lambda: not alive(family)), f"survivors after kill {attempt}: {alive(family)}"
    done = cli(build_args(table, root))
    assert done.returncode == 0, done.stderr
    assert sums(root) == reference


def test_torn_staged_file_is_redone(kill_world, tmp_path, cli):
    table, reference = kill_world
    root = tmp_path / "cache"
    args = build_args(table, root, "--workers-per-gpu", "0")
    assert run_cli(args, LATENTFORGE_FAULT="commit:1").returncode == -signal.SIGKILL
    victim = root / "build" / "staging" / "unit-000003.h5"
    size = victim.stat().st_size
    with open(victim, "r+b") as handle:
        handle.truncate(size // 2)
    assert 3 not in completed_units(root / "build")
    done = cli(args)
    assert done.returncode == 0, done.stderr
    assert 3 in completed_units(root / "build") and not victim.exists()  # encoded again, committed, retired
    assert sums(root) == reference


def _start_and_wait_for_staging(table, root):
    process = subprocess.Popen(cli_command(build_args(table, root, "--procs", "2", "--workers-per-gpu", "1")),
                               env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert wait_for(lambda: _staged(root) or process.poll() is not None, 90)
    assert process.poll() is None, process.communicate()
    return process


def test_sigterm_exits_143_with_resume_hint(kill_world, tmp_path, cli):
    table, reference = kill_world
    root = tmp_path / "cache"
    process = _start_and_wait_for_staging(table, root)
    family = descendants(process.pid)
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 143, stderr
    assert time.monotonic() - started < 30  # prompt: the ranks get 5 s to stop, then SIGKILL
    assert "Resume with" in stderr and "latentforge build --reader table" in stderr.replace("\n", " ")
    assert wait_for(lambda: not alive(family))
    done = cli(build_args(table, root))
    assert done.returncode == 0 and sums(root) == reference, done.stderr

