"""Process trees from /proc, and waiting on a condition with a generous deadline (never a fixed sleep: the
machines that run the tests are shared and sometimes loaded)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

# Long enough for a loaded two-core machine; a passing condition returns at once, so it costs nothing.
GENEROUS = 60.0


def wait_for(predicate: Callable[[], bool], timeout: float = GENEROUS, poll: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(poll)
    return predicate()


def children() -> dict[int, list[int]]:
    """{parent pid: [child pids]} of every live (non-zombie) process."""
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            state, parent = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:2]
        except OSError:
            continue
        if state != "Z":
            tree.setdefault(int(parent), []).append(int(entry.name))
    return tree


def descendants(pid: int) -> set[int]:
    tree, found, frontier = children(), set(), [pid]
    while frontier:
        for child in tree.get(frontier.pop(), []):
            if child not in found:
                found.add(child)
                frontier.append(child)
    return found


def command_line(pid: int) -> str:
    """The process's arguments joined by spaces; "" once it is gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def spawned_workers(pid: int) -> set[int]:
    """The descendants started by multiprocessing's spawn (ranks, decode workers), not other children such as
    the resource tracker or a `uname -p` that an import runs."""
    return {child for child in descendants(pid) if "spawn_main" in command_line(child)}


def alive(pids: set[int]) -> set[int]:
    """The pids that still run (zombies count as gone)."""
    running = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            running.add(pid)
    return running
