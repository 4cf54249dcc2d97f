"""The processes of one build's Ray session on this machine, found by a token in their environment.

A driver that starts its own Ray puts BUILD_TOKEN_ENV=<its lock token> in the environment Ray's daemons
are started with (GCS, raylet, agents, and through the raylet every worker and decode child), and gives its
actors the same variable. Ray's process titles hide what a worker belongs to, the environment does not; so
the next build that takes the lock can find, kill and wait out every process of a driver that died
(builder/lock.py) before it touches the staging folder.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from ...errors import LatentforgeError
from ...io import write_text_atomic

BUILD_TOKEN_ENV = "LATENTFORGE_BUILD_TOKEN"
SESSION_RECORD = "ray-session.json"  # in ROOT/build, next to the lock
REAP_SECONDS = 60.0  # a loaded two-core machine takes seconds to tear down a Ray node; a clean one takes none


def _environ_has(pid: str, entry: bytes) -> bool:
    try:
        return entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:  # gone, or another user's process (not ours to kill)
        return False


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def processes_with_env(name: str, value: str) -> set[int]:
    """Live processes of this machine (not this one) whose environment has name=value."""
    entry = f"{name}={value}".encode()
    me = os.getpid()
    found = {int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me and _environ_has(p, entry)}
    return {pid for pid in found if not _is_zombie(pid)}


def with_descendants(pids: set[int]) -> set[int]:
    """`pids` and every live process below them. Ray's raylet starts its agents with an environment of its
    own making, so they are found as its children; once the raylet is gone they hang from init instead."""
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            tree.setdefault(parent, []).append(int(entry))
    found, frontier = set(pids), list(pids)
    while frontier:
        for child in tree.get(frontier.pop(), []):
            if child not in found:
                found.add(child)
                frontier.append(child)
    return {pid for pid in found if not _is_zombie(pid)}


def session_processes(token: str) -> set[int]:
    """Every process of the session `token`: those with the token in their environment and their children."""
    return with_descendants(processes_with_env(BUILD_TOKEN_ENV, token)) - {os.getpid()}


def start_ticks(pid: int) -> int | None:
    """When the process started (clock ticks after boot), so a recorded pid is not confused with a reused one."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def record_session(build_dir: Path, token: str) -> None:
    """Write ROOT/build/ray-session.json: the pids (with start times) of the Ray processes this driver started,
    with those an earlier call recorded that still run. Ray's agents take an environment without the token and
    outlive a killed raylet, orphaned, for tens of seconds; this is how the next build still finds them."""
    pids = {str(pid): start_ticks(pid) for pid in _recorded(build_dir, token) | session_processes(token)}
    write_text_atomic(Path(build_dir) / SESSION_RECORD,
                      json.dumps({"token": token, "pids": dict(sorted(pids.items(), key=lambda p: int(p[0])))}) + "\n")


def start_own_ray(ray: Any, build_dir: Path, token: str, log_to_driver: bool) -> None:
    """Start a one-machine Ray whose every process carries `token` (inherited from this environment, which
    gets the token only for the start), then record its processes (record_session)."""
    saved = os.environ.get(BUILD_TOKEN_ENV)
    os.environ[BUILD_TOKEN_ENV] = token
    try:
        ray.init(address="local", log_to_driver=log_to_driver)
    finally:
        if saved is None:
            os.environ.pop(BUILD_TOKEN_ENV, None)
        else:
            os.environ[BUILD_TOKEN_ENV] = saved
    record_session(build_dir, token)


def _recorded(build_dir: Path, token: str) -> set[int]:
    """The recorded pids of session `token` that still run the process recorded (same start time)."""
    try:
        record = json.loads((Path(build_dir) / SESSION_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    if record.get("token") != token:
        return set()
    return {int(pid) for pid, ticks in record.get("pids", {}).items()
            if ticks is not None and start_ticks(int(pid)) == ticks and not _is_zombie(int(pid))}


def reap_build(build_dir: Path, token: str, timeout: float = REAP_SECONDS) -> set[int]:
    """SIGKILL every process of the build `token` on this machine until none is left; returns the pids killed.
    Called by the next holder of the build lock, when that build's driver is gone."""
    killed: set[int] = set()
    deadline = time.monotonic() + timeout
    while True:
        left = (session_processes(token) | _recorded(build_dir, token)) - {os.getpid()}
        if not left:
            return killed
        if time.monotonic() > deadline:
            raise LatentforgeError(
                f"processes {sorted(left)} of the build that held this cache's lock before ({BUILD_TOKEN_ENV}="
                f"{token}) are still running {timeout:.0f} s after SIGKILL; they may still write into "
                f"{build_dir}/staging. Stop them (kill -9 {' '.join(map(str, sorted(left)))}), then rerun")
        for pid in left - killed:  # a Ray worker may still start children while we kill: loop until none
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            killed.add(pid)
        time.sleep(0.02)
