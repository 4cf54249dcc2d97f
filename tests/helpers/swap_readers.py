"""A commit held inside its swap while a reader reads the root in a loop: what the never-unpublished commit tests of
local roots share (tests/builder/test_generation_swap_roots.py, tests/builder/test_extend_webdataset.py)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable

from helpers.processes import wait_for
from latentforge import verify
from latentforge.testing import fault_points

DEADLINE = 60.0  # seconds; every wait is for a condition, this only bounds a broken run


class Reader(threading.Thread):
    """read(root) in a loop, with a verify every other round, until told to stop; every failure is noted."""

    def __init__(self, root: Path, read: Callable[[Path], int]):
        super().__init__(daemon=True)
        self.root, self.read, self.stop = root, read, threading.Event()
        self.rounds, self.samples, self.errors = 0, set(), []

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.samples.add(self.read(self.root))
                if self.rounds % 2 == 0 and not (report := verify(self.root)).ok:
                    self.errors.append([(c.name, c.detail) for c in report.failures])
            except Exception as error:  # every failure is what the test looks for
                self.errors.append(repr(error))
            self.rounds += 1


def file_identities(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_ino, p.stat().st_mtime_ns) for p in root.rglob("*")
            if p.is_file() and "build" not in p.relative_to(root).parts and not p.name.startswith("_")}


def commit_held_in_its_swap(root: Path, commit: Callable[[], object], read: Callable[[Path], int], tmp_path: Path,
                             monkeypatch) -> Reader:
    """commit() in a thread, held after the second file its swap moves, while a reader reads the root in a loop."""
    release = tmp_path / "release"
    monkeypatch.setenv(fault_points.FAULT_ENV, "swap:2:wait")
    monkeypatch.setenv(fault_points.RELEASE_ENV, str(release))
    monkeypatch.setattr(fault_points, "_arrivals", {})
    reader = Reader(root, read)
    reader.start()
    failed: list[BaseException] = []

    def run() -> None:
        try:
            commit()
        except BaseException as error:  # noqa: BLE001 - reported by the test
            failed.append(error)

    committer = threading.Thread(target=run, daemon=True)
    try:
        assert wait_for(lambda: reader.rounds >= 2, DEADLINE)
        committer.start()
        assert wait_for(lambda: Path(f"{release}.waiting").exists() or not committer.is_alive(), DEADLINE)
        assert (root / "build" / "swap").is_dir(), failed
        held = reader.rounds
        assert wait_for(lambda: reader.rounds >= held + 3, DEADLINE)  # rounds that began inside the swap
        release.touch()
        committer.join(DEADLINE)
        assert not committer.is_alive() and failed == []
        finished = reader.rounds
        assert wait_for(lambda: reader.rounds >= finished + 2, DEADLINE)
    finally:
        release.touch()
        reader.stop.set()
        reader.join(DEADLINE)
    assert not (root / "build" / "swap").exists()
    return reader
