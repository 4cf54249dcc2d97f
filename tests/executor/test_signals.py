"""Signals reach a build whose ranks and decode workers are busy: SIGUSR1 dumps the stacks of every process
(faulthandler; the main process to stderr, each child to ROOT/build/stacks/<role>-<pid>.txt) and stops none,
even during start-up; SIGKILL of the main process takes every child with it (PR_SET_PDEATHSIG).

The build stalls each decode worker inside its first decode (LATENTFORGE_FAULT=decode:1:sleep), so nothing
finishes by itself: a child still alive after the main process died was not taken down by its parent's
death. (Without the stall the tiny build finishes within a second and its children exit normally, which is
why a plain kill test cannot tell whether PDEATHSIG works.)"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.exec_world import build_args, cli_command, cli_env, make_table
from helpers.processes import alive, children, command_line, descendants, wait_for

pytestmark = pytest.mark.slow  # a long end-to-end run; -m 'not slow' leaves it out

STALL = "decode:1:sleep"
PROCS = 2  # ranks, each with one decode worker


def _catches_sigusr1(pid: int) -> bool:
    """Whether the process has a SIGUSR1 handler installed (SigCgt in /proc/<pid>/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
    return bool(caught & (1 << (signal.SIGUSR1 - 1)))


@dataclass
class StalledBuild:
    process: subprocess.Popen
    root: Path
    stderr: Path
    ranks: list[int]
    workers: list[int]
    start_up_signals: int  # SIGUSR1s sent while the ranks and decode workers were starting
    children_when_caught: list[int]  # the main process's children when it first caught SIGUSR1


@pytest.fixture(scope="module")
def stalled_build(tmp_path_factory):
    """A build with PROCS ranks whose decode workers all stall. From the moment the main process catches
    SIGUSR1 until every worker has stalled it gets a SIGUSR1 every 0.1 s, which it forwards to whatever
    children it has. One build serves every test here (starting one costs seconds of imports); the SIGKILL
    test, last in this file, ends it. Whatever is left is SIGKILLed afterwards."""
    folder = tmp_path_factory.mktemp("signals")
    table = make_table(folder / "data", count=8)
    stderr, root = folder / "stderr.txt", folder / "cache"
    args = build_args(table, root, "--procs", str(PROCS), "--workers-per-gpu", "1")
    with open(stderr, "w") as sink:
        process = subprocess.Popen(cli_command(args), env=cli_env(LATENTFORGE_FAULT=STALL),
                                   stdout=subprocess.DEVNULL, stderr=sink)
    family: set[int] = set()

    def stalled() -> bool:  # every decode worker announces its stall (testing/fault_points.py)
        return stderr.read_text().count("stalls at decode") == PROCS

    try:
        assert wait_for(lambda: _catches_sigusr1(process.pid) or process.poll() is not None, poll=0.005), \
            stderr.read_text()
        children_when_caught = children().get(process.pid, [])
        sent, deadline = 0, time.monotonic() + 60
        while not stalled() and process.poll() is None and time.monotonic() < deadline:
            process.send_signal(signal.SIGUSR1)
            sent += 1
            time.sleep(0.1)
        assert stalled() and process.poll() is None, stderr.read_text()[-3000:]
        family = descendants(process.pid)
        tree = children()
        ranks = [p for p in tree.get(process.pid, []) if "resource_tracker" not in command_line(p)]
        workers = [w for rank in ranks for w in tree.get(rank, [])]
        assert len(ranks) == PROCS and len(workers) == PROCS, (ranks, workers)
        yield StalledBuild(process, root, stderr, ranks, workers, sent, children_when_caught)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        for pid in alive(family):
            os.kill(pid, signal.SIGKILL)


def _dumps(text: str) -> list[str]:
    """faulthandler's thread dumps, one string per thread ('Current thread 0x…' / 'Thread 0x…' blocks)."""
    blocks, current = [], None
    for line in text.splitlines():
        if line.startswith(("Thread 0x", "Current thread 0x")):
            current = [line]
            blocks.append(current)
        elif current is not None and line.startswith("  File "):
            current.append(line)
        else:
            current = None
    return ["\n".join(block) for block in blocks]


def _stack_files(build: StalledBuild) -> dict[int, Path]:
    """pid -> ROOT/build/stacks/<role>-<pid>.txt"""
    return {int(p.stem.rsplit("-", 1)[1]): p for p in (build.root / "build" / "stacks").glob("*.txt")}


def test_sigusr1_during_start_up_stops_no_process(stalled_build):
    # the main process catches SIGUSR1 from the start of the build (plan and probe can take hours), before
    # it starts any child (the resource tracker comes with the ranks' queues)
    assert stalled_build.children_when_caught == []
    # the fixture signalled the main process all through the ranks' and workers' start-up, and still every
    # rank and worker came up and reached its stall; a held signal is delivered once the handler is set
    assert stalled_build.start_up_signals >= 10
    files = _stack_files(stalled_build)
    assert set(stalled_build.ranks) | set(stalled_build.workers) <= set(files)
    assert all(_dumps(files[pid].read_text()) for pid in stalled_build.ranks + stalled_build.workers)


def test_sigusr1_dumps_the_stacks_of_the_main_process_ranks_and_decode_workers(stalled_build):
    build = stalled_build
    files = _stack_files(build)
    before = {pid: len(path.read_text()) for pid, path in files.items()}
    before_main = len(build.stderr.read_text())
    build.process.send_signal(signal.SIGUSR1)

    def new_dumps(pid: int) -> list[str]:
        return _dumps(files[pid].read_text()[before[pid]:])

    # Where each process stands: the main process polls its ranks, a rank waits for decoded samples, a
    # decode worker sits in the stalled decode. Each dump is whole: nothing else writes to its file.
    def complete() -> bool:
        main = _dumps(build.stderr.read_text()[before_main:])
        return (sum(" in _run_spawned" in d for d in main) == 1
                and all(sum(" in rank_process_main" in d for d in new_dumps(p)) == 1 for p in build.ranks)
                and all(sum(" in _decode_in_worker" in d for d in new_dumps(p)) == 1 for p in build.workers))

    assert wait_for(complete), (build.stderr.read_text()[before_main:],
                                     {pid: path.read_text()[before[pid]:] for pid, path in files.items()})
    assert "stacks of the other processes of this build go to" in build.stderr.read_text()[before_main:]
    assert build.process.poll() is None  # a stack dump stops nothing
    assert alive(set(build.ranks) | set(build.workers)) == set(build.ranks) | set(build.workers)


def test_no_child_survives_sigkill_of_the_main_process_while_busy(stalled_build):
    build = stalled_build
    family = descendants(build.process.pid)  # ranks, decode workers and the resource tracker
    build.process.send_signal(signal.SIGKILL)
    build.process.wait()
    assert wait_for(lambda: not alive(family)), (
        f"processes outlived the main process: {sorted(alive(family))} (ranks {build.ranks}, decode workers "
        f"{build.workers}): PR_SET_PDEATHSIG did not take them down")
