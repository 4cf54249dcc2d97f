"""A complete cache is never unpublished: readers that open it in a loop while `build --extend` commits find a whole
cache every time, the old one and then the new one; a kill before or inside the swap leaves a whole cache, and the
rerun ends with the bytes of an uninterrupted extend."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import pytest

from helpers.builds import table_subset
from helpers.exec_world import build_args, exec_config, make_table, run_cli, sums
from helpers.processes import wait_for
from latentforge.builder.run import build
from latentforge.sinks.hdf5.dataset import LatentCacheDataset
from latentforge.verification.entry import verify

BASE_IDS = ("clip000", "clip002", "clip004", "clip005")  # the union adds clip001, clip003 and clip006
OLD, NEW = 4, 7  # samples in the cache before and after the extend
DEADLINE = 120.0  # seconds; every wait is for a condition, this only bounds a broken run


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    folder = tmp_path_factory.mktemp("swap")
    union = make_table(folder / "data", count=NEW)
    base = table_subset(union, "base.csv", BASE_IDS)
    reference = folder / "reference"
    build(exec_config(base, reference), quiet=True)
    build(exec_config(union, reference), quiet=True, extend=True)
    return union, base, sums(reference)


def _base(world, tmp_path: Path) -> Path:
    root = tmp_path / "cache"
    build(exec_config(world[1], root), quiet=True)
    return root


def _extend_args(world, root: Path) -> list[str]:
    return build_args(world[0], root, "--extend", "--workers-per-gpu", "0")


def _whole(root: Path) -> int:
    """The samples of the cache at `root`, once a Dataset read its last row and verify passed."""
    dataset = LatentCacheDataset(root)
    try:
        last = len(dataset) - 1
        assert dataset[last]["dataset_index"] == last
    finally:
        dataset.close()
    report = verify(root)
    assert report.ok, [(c.name, c.detail) for c in report.failures]
    return len(dataset)


class _Reader(threading.Thread):
    """Opens the cache and reads a row in a loop, with a verify every few rounds, until told to stop."""

    def __init__(self, root: Path):
        super().__init__(daemon=True)
        self.root, self.stop = root, threading.Event()
        self.rounds, self.generations, self.errors = 0, set(), []

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                dataset = LatentCacheDataset(self.root)
                last = len(dataset) - 1
                if dataset[last]["dataset_index"] != last:
                    self.errors.append(f"row {last} read back as another")
                dataset.close()
                if self.rounds % 4 == 0 and not verify(self.root).ok:
                    self.errors.append(f"verify failed at round {self.rounds}")
                self.generations.add(len(dataset))
            except Exception as error:  # every failure is what the test looks for
                self.errors.append(repr(error))
            self.rounds += 1


def test_readers_in_a_loop_find_a_whole_cache_before_during_and_after_an_extend(world, tmp_path):
    root = _base(world, tmp_path)
    release = tmp_path / "release"
    reader = _Reader(root)
    reader.start()
    done: list = []
    # the extend is held inside its swap (after its first file moved into the root) while the reader goes on
    builder = threading.Thread(target=lambda: done.append(run_cli(
        _extend_args(world, root), timeout=DEADLINE, LATENTFORGE_FAULT="swap:1:wait",
        LATENTFORGE_FAULT_RELEASE=str(release))))
    try:
        assert wait_for(lambda: OLD in reader.generations, DEADLINE)
        builder.start()
        assert wait_for(lambda: Path(f"{release}.waiting").exists() or not builder.is_alive(), DEADLINE)
        assert (root / "build" / "swap").is_dir(), done
        held = reader.rounds
        assert wait_for(lambda: reader.rounds >= held + 3, DEADLINE)  # rounds that began inside the swap
        release.touch()
        builder.join(DEADLINE)
        assert done and done[0].returncode == 0, done
        finished = reader.rounds
        assert wait_for(lambda: reader.rounds >= finished + 2, DEADLINE)
    finally:
        release.touch()
        reader.stop.set()
        reader.join(DEADLINE)
    assert reader.errors == []
    assert reader.generations == {OLD, NEW}
    assert sums(root) == world[2]
    assert not (root / "build" / "swap").exists()


@pytest.mark.parametrize("phase", ["marker:1", "swap:1", "swap:6"])
def test_a_kill_in_the_commit_leaves_a_whole_cache_and_the_rerun_finishes_it(world, tmp_path, phase):
    root = _base(world, tmp_path)
    killed = run_cli(_extend_args(world, root), timeout=DEADLINE, LATENTFORGE_FAULT=phase)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    swapping = phase.startswith("swap")
    assert (root / "build" / "swap").is_dir() == swapping
    assert (root / "_CACHE_COMPLETE").is_file()  # the old cache's marker, or already the new one's
    assert _whole(root) == (NEW if swapping else OLD)  # killed inside the swap: the new cache, read from build/swap
    finished = run_cli(_extend_args(world, root), timeout=DEADLINE)
    assert finished.returncode == 0, finished.stderr
    assert sums(root) == world[2]
    assert _whole(root) == NEW
    assert not (root / "build" / "swap").exists() and not (root / "build" / "next").exists()
