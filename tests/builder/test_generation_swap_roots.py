"""The never-unpublished commit of a WebDataset cache in a local folder and of a bucketed root: readers that open
the cache in a loop while a rerun commits it again, held inside its swap, find a whole cache every time; the rerun
keeps every unchanged file as it was (same inode, same mtime)."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Callable

import pytest

from helpers.fake_rows import (
    PLAN_REJECTS,
    empty_prompt_arrays,
    make_cache_config,
    make_samples,
    planned_units,
    stage_units,
)
from helpers.processes import wait_for
from latentforge import StreamingLatentDataset, verify
from latentforge.cache.bucket_index import BucketIndex
from latentforge.cache.rows import read_rejects
from latentforge.sinks.hdf5.bucket_commit import commit_bucketed_root
from latentforge.sinks.hdf5.bucketed_dataset import BucketedLatentDataset
from latentforge.sinks.webdataset.commit import WebDatasetOptions, commit_webdataset
from latentforge.testing import fault_points
from latentforge.transfer import Destination

DEADLINE = 60.0  # seconds; every wait is for a condition, this only bounds a broken run


class _Reader(threading.Thread):
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


def _file_identities(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_ino, p.stat().st_mtime_ns) for p in root.rglob("*")
            if p.is_file() and "build" not in p.relative_to(root).parts and not p.name.startswith("_")}


def _commit_held_in_its_swap(root: Path, commit: Callable[[], object], read: Callable[[Path], int], tmp_path: Path,
                             monkeypatch) -> _Reader:
    """commit() in a thread, held after the second file its swap moves, while a reader reads the root in a loop."""
    release = tmp_path / "release"
    monkeypatch.setenv(fault_points.FAULT_ENV, "swap:2:wait")
    monkeypatch.setenv(fault_points.RELEASE_ENV, str(release))
    monkeypatch.setattr(fault_points, "_arrivals", {})
    reader = _Reader(root, read)
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


def _streamed(root: Path) -> int:
    return sum(1 for _ in StreamingLatentDataset(str(root)))


def test_a_local_webdataset_cache_rerun_is_read_whole_throughout_and_keeps_its_files(tmp_path, monkeypatch):
    units = stage_units(tmp_path / "build", make_samples(), unit_size=6)
    root = tmp_path / "wds"

    def commit() -> object:
        return commit_webdataset(Destination(str(root)), units, PLAN_REJECTS, make_cache_config(),
                                 empty_prompt_arrays(), WebDatasetOptions(tmp_path / "staging", shard_bytes=6 * 2304),
                                 planned_units(6))

    first = commit()
    before = _file_identities(root)
    assert len([rel for rel in before if rel.endswith(".tar")]) > 2
    reader = _commit_held_in_its_swap(root, commit, _streamed, tmp_path, monkeypatch)
    assert reader.errors == []
    assert reader.samples == {first.num_samples}
    assert _file_identities(root) == before  # every object the rerun found with its bytes, linked, not rewritten
    assert not (root / "build").exists()  # a WebDataset root keeps build/ for a commit's swap alone


@pytest.fixture
def bucketed(bucketed_cache, tmp_path) -> Path:
    root = tmp_path / "bucketed"
    shutil.copytree(bucketed_cache, root)
    return root


def _bucketed_rows(root: Path) -> int:
    dataset = BucketedLatentDataset(root)
    last = len(dataset) - 1
    name, local = dataset.locate(last)
    assert dataset[last]["bucket"] == name and int(dataset[last]["dataset_index"]) == local
    for bucket in dataset.buckets.values():
        bucket.close()
    return len(dataset)


def test_a_bucketed_root_rerun_is_read_whole_throughout_and_keeps_its_buckets(bucketed, tmp_path, monkeypatch):
    index, rejects = BucketIndex.load(bucketed), read_rejects(bucketed)
    before = _file_identities(bucketed / "buckets")
    reader = _commit_held_in_its_swap(bucketed, lambda: commit_bucketed_root(bucketed, index, rejects),
                                      _bucketed_rows, tmp_path, monkeypatch)
    assert reader.errors == []
    assert reader.samples == {index.num_samples}
    assert _file_identities(bucketed / "buckets") == before
