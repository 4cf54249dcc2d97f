"""Taking the build lock first kills, on this machine, every process left by the build that held it before:
those carrying its token in their environment, their children, and the pids it recorded (Ray's agents, which
Ray starts with an environment of its own). Real processes, found through /proc as the lock finds them."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from helpers.processes import alive, wait_for
from latentforge.builder.lock import BuildLock
from latentforge.errors import LatentforgeError
from latentforge.executor.lock_record import LockRecord, read_lock_record
from latentforge.executor.ray.session import BUILD_TOKEN_ENV, SESSION_RECORD, start_ticks

# a parent with the token that starts a child, and prints the child's pid
PARENT = "import subprocess, sys, time; c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']);" \
         " print(c.pid, flush=True); time.sleep(600)"


def _leftovers(token: str) -> tuple[subprocess.Popen, int, subprocess.Popen]:
    """(a process with the token, its child, a process without the token as Ray's agents are)."""
    env = {**os.environ, BUILD_TOKEN_ENV: token}
    parent = subprocess.Popen([sys.executable, "-c", PARENT], env=env, stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    agent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                             env={k: v for k, v in os.environ.items() if k != BUILD_TOKEN_ENV})
    return parent, child, agent


def test_next_lock_holder_kills_the_dead_builds_processes(tmp_path):
    build_dir = tmp_path / "build"
    build_dir.mkdir()
    old = LockRecord(999_999, socket.gethostname(), "dead-build-token")
    (build_dir / "lock").write_text(old.to_text())  # as left by a driver killed while holding the lock
    parent, child, agent = _leftovers(old.token)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # not the build's
    try:
        (build_dir / SESSION_RECORD).write_text(json.dumps(
            {"token": old.token, "pids": {str(agent.pid): start_ticks(agent.pid)}}))
        with BuildLock(build_dir) as lock:
            assert not alive({parent.pid, child, agent.pid})  # gone before the lock is ours
            assert alive({bystander.pid}) == {bystander.pid}
            record = read_lock_record(build_dir)
            assert record == lock.record and record.pid == os.getpid() and record.token != old.token
    finally:
        for process in (parent, agent, bystander):
            process.kill()
            process.wait()
    assert wait_for(lambda: not alive({child}))


def test_a_recorded_pid_reused_by_another_process_is_spared(tmp_path):
    build_dir = tmp_path / "build"
    build_dir.mkdir()
    old = LockRecord(999_999, socket.gethostname(), "dead-build-token")
    (build_dir / "lock").write_text(old.to_text())
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:  # the record names this pid with another start time: the process it named is gone, the pid reused
        (build_dir / SESSION_RECORD).write_text(json.dumps(
            {"token": old.token, "pids": {str(other.pid): start_ticks(other.pid) - 1}}))
        with BuildLock(build_dir):
            assert alive({other.pid}) == {other.pid}
    finally:
        other.kill()
        other.wait()


def test_lock_held_by_a_live_build_is_refused_naming_it(tmp_path):
    with BuildLock(tmp_path / "build"):
        with pytest.raises(LatentforgeError, match=rf"held by pid {os.getpid()} on {socket.gethostname()}"):
            BuildLock(tmp_path / "build").__enter__()
