"""`build --extend` of a bucketed root: each bucket that gains members grows as a single-shape cache does (old rows
keep their place and bytes, full old shards are hard links), a bucket that gains none keeps its files as they were,
one that was empty is built; the result holds, bucket by bucket, the rows of a fresh build of the grown input, and
an interrupted extend rerun with the same command ends in the same bytes."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest

from helpers.bucket_world import bucket_config
from helpers.builds import checksummed_bytes, table_subset
from helpers.swap_readers import commit_held_in_its_swap
from helpers.swap_steps import SwapHeld, bucketed_items, hold_before_swap, linked_copy, read_items, swap_steps
from latentforge.builder.run import build
from latentforge.cache.generation_swap import finish_swap, swap_in
from latentforge.cache.layout import SOURCE_INDEX_DATASET
from latentforge.dataset import BucketedLatentDataset
from latentforge.errors import LatentforgeError, UnitFailed
from latentforge.executor.base import Executor
from latentforge.sinks.hdf5 import bucket_commit
from latentforge.testing import fault_points
from latentforge.verification.entry import verify

from .test_extend import PLACE_FIELDS

# landscape_long joins 17x32x64 (its one old row's shard is written again), square_big joins 17x48x48 (its full old
# shard is linked), short is the first of 9x32x64, tiny fits no bucket; 17x64x32 (portrait*) gains nothing
BASE_IDS = ("landscape", "near_square", "portrait", "portrait_rotated", "square")
NEW_IDS = ["landscape_long", "short", "square_big", "tiny"]


def _rows(root: Path) -> dict[str, tuple[str, dict, dict[str, bytes]]]:
    """{sample_id: (bucket, manifest row, {dataset: row bytes})}, read with h5py through each bucket's manifest."""
    out = {}
    for entry in json.loads((root / "buckets.json").read_text())["buckets"]:
        if entry["path"] is None:
            continue
        for line in (root / entry["path"] / "manifest.jsonl").read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            with h5py.File(root / entry["path"] / row["shard_path"], "r") as shard:
                arrays = {n: np.asarray(shard[n][row["cache_row"]]).tobytes() for n in shard
                          if n != SOURCE_INDEX_DATASET}
            out[row["sample_id"]] = (entry["name"], row, arrays)
    return out


def _files(folder: Path) -> dict[str, tuple[int, int, int]]:
    """(inode, size, mtime_ns) of every file of a cache outside its build records."""
    return {p.relative_to(folder).as_posix(): (p.stat().st_ino, p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file() and "build" not in p.relative_to(folder).parts}


def _extend(bucket_inputs, root: Path):
    return build(bucket_config(*bucket_inputs, root), quiet=True, extend=True)


@pytest.fixture(scope="module")
def base(bucket_inputs, tmp_path_factory) -> Path:
    """The bucketed root of BASE_IDS; tests extend copies of it."""
    table, t5 = bucket_inputs
    root = tmp_path_factory.mktemp("bucket-extend-base") / "cache"
    build(bucket_config(table_subset(table, "bucket-extend-base.csv", BASE_IDS), t5, root), quiet=True)
    return root


def _copy(base: Path, folder: Path) -> Path:
    shutil.copytree(base, folder / "cache")
    return folder / "cache"


@pytest.fixture(scope="module")
def extended(base, bucket_inputs, tmp_path_factory):
    """(the base root's files and rows before, the ids each probe met, the extend's result, the extended root)."""
    root = _copy(base, tmp_path_factory.mktemp("bucket-extend"))
    before = (_files(root), _rows(root))
    probed: list[list[str]] = []
    run_probe = Executor.run_probe

    def counted(self, samples, *args, **kwargs):
        probed.append(sorted(s.sample_id for s in samples))
        return run_probe(self, samples, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Executor, "run_probe", counted)
        result = _extend(bucket_inputs, root)
    return before, probed, result, root


def test_extend_grows_the_buckets_that_gain_members_and_keeps_the_old_rows(extended, bucketed_cache):
    (files, rows), probed, result, root = extended
    assert result.added_ids == NEW_IDS and result.removed_ids == [] and result.num_samples == 8
    assert probed == [NEW_IDS]  # the old samples' buckets come from their recorded probe results
    after = _rows(root)
    for sample_id, (bucket, row, arrays) in rows.items():  # old rows: same bucket, place and bytes
        assert after[sample_id][0] == bucket and after[sample_id][2] == arrays, sample_id
        assert after[sample_id][1]["dataset_index"] == row["dataset_index"], sample_id
    fresh = _rows(bucketed_cache)
    assert sorted(after) == sorted(fresh)
    for sample_id, (bucket, row, arrays) in after.items():  # a fresh build's rows, but for the place fields
        assert bucket == fresh[sample_id][0] and arrays == fresh[sample_id][2], sample_id
        assert {k: v for k, v in row.items() if k not in PLACE_FIELDS} == \
               {k: v for k, v in fresh[sample_id][1].items() if k not in PLACE_FIELDS}, sample_id
    assert after["square_big"][1]["dataset_index"] == 2 and after["landscape_long"][1]["dataset_index"] == 1
    now = _files(root)
    untouched = {k: v for k, v in files.items() if k.startswith("buckets/17x64x32/")}
    assert untouched and all(now[k] == v for k, v in untouched.items())  # gained nothing: not written
    linked = "buckets/17x48x48/shards/part-00000-of-00001-000000000-000000002.h5"
    assert now["buckets/17x48x48/shards/part-00000-of-00002-000000000-000000002.h5"] == files[linked]
    assert [json.loads(line)["sample_id"] for line in (root / "rejects.jsonl").read_text().splitlines()] == ["tiny"]


def test_the_extended_root_verifies_and_reads(extended):
    *_, root = extended
    report = verify(root)
    assert report.ok, report.failures
    subprocess.run(["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=root, check=True)
    dataset = BucketedLatentDataset(root)
    assert dataset.bucket_sizes == {"17x32x64": 2, "17x64x32": 2, "17x48x48": 3, "9x32x64": 1}
    assert dataset[len(dataset) - 1]["bucket"] == "9x32x64"


def test_a_plain_rerun_after_an_extend_is_refused(extended, bucket_inputs, tmp_path):
    *_, root = extended
    copy = _copy(root, tmp_path)
    with pytest.raises(LatentforgeError, match="was extended.*--extend"):
        build(bucket_config(*bucket_inputs, copy), quiet=True)
    again = _extend(bucket_inputs, copy)  # nothing new: the buckets stay, the root commits again
    assert again.added_ids == [] and checksummed_bytes(copy) == checksummed_bytes(root)


@pytest.mark.parametrize("fault, error", [
    ("encode:2:raise", UnitFailed),  # in 17x48x48's new unit; 17x32x64's new cache waits in its build/next
    ("manifest:2:raise", fault_points.InjectedFault),  # in 17x48x48's commit
    ("marker:4:raise", fault_points.InjectedFault),  # in the root's commit: 9x32x64 holds only its build/
    ("swap:3:raise", fault_points.InjectedFault),  # in the root's swap, moving 17x32x64's new files in
])
def test_an_interrupted_extend_resumes_to_the_same_bytes(base, extended, bucket_inputs, tmp_path, monkeypatch,
                                                         fault, error):
    *_, reference = extended
    root = _copy(base, tmp_path)
    monkeypatch.setenv(fault_points.FAULT_ENV, fault)
    monkeypatch.setattr(fault_points, "_arrivals", {})
    with pytest.raises(error):
        _extend(bucket_inputs, root)
    monkeypatch.delenv(fault_points.FAULT_ENV)
    report = verify(root)  # readers find a whole root: the old one, or (in the swap) the new one
    assert report.ok and report.checks[-1].name.startswith("9x32x64/") == fault.startswith("swap"), report.failures
    result = _extend(bucket_inputs, root)
    assert result.added_ids == [] and result.num_samples == 8
    assert checksummed_bytes(root) == checksummed_bytes(reference)


@pytest.fixture(scope="module")
def held(base, bucket_inputs, tmp_path_factory) -> Path:
    """An extend held where its root's swap starts: 9x32x64 filled for the first time, 17x32x64 and 17x48x48 grown,
    each waiting in its build/next, the new root whole in the root's build/next."""
    root = _copy(base, tmp_path_factory.mktemp("bucket-extend-held"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bucket_commit, "swap_in", hold_before_swap)
        with pytest.raises(SwapHeld):
            _extend(bucket_inputs, root)
    return root


def test_a_dataset_opened_at_any_step_of_the_swap_reads_one_whole_generation(base, extended, held, tmp_path,
                                                                             monkeypatch):
    """The held extend's swap stopped after each of its moves: a BucketedLatentDataset opened there reads every item
    of the old root or of the new one, and one opened there but read once the swap is done reads the new one."""
    *_, reference = extended
    old, new = bucketed_items(base), bucketed_items(reference)
    assert {item[0] for item in new} - {item[0] for item in old} == {"9x32x64"}
    assert bucketed_items(held) == old
    steps = 0
    for root in swap_steps(held, tmp_path, monkeypatch, swap_in):
        steps += 1
        opened = BucketedLatentDataset(root)
        assert bucketed_items(root) == new, steps
        finish_swap(root)
        assert read_items(opened) == new, steps
    assert steps > 10  # the grown and the filled buckets' files, each bucket through its own swap, then the root's


def test_a_dataset_read_in_a_loop_through_the_swap_reads_one_whole_generation(base, extended, held, tmp_path,
                                                                             monkeypatch):
    *_, reference = extended
    generations = [bucketed_items(base), bucketed_items(reference)]
    root = linked_copy(held, tmp_path / "cache")
    reader = commit_held_in_its_swap(root, lambda: swap_in(root),
                                     lambda at: generations.index(bucketed_items(at)), tmp_path, monkeypatch)
    assert reader.errors == []
    assert reader.samples == {0, 1}


def _own_world(bucket_inputs, folder: Path) -> Path:
    """A copy of the base's clips and of the table, so that a source can go: the copied table."""
    table, _ = bucket_inputs
    folder.mkdir()
    for clip in (*BASE_IDS, "short"):
        shutil.copy2(table.with_name(f"{clip}.mp4"), folder / f"{clip}.mp4")
    return Path(shutil.copy2(table, folder / table.name))


def test_removed_ids_are_kept_also_when_their_sources_are_gone(bucket_inputs, tmp_path):
    t5 = bucket_inputs[1]
    table = _own_world(bucket_inputs, tmp_path / "world")
    root = tmp_path / "cache"
    build(bucket_config(table_subset(table, "base.csv", BASE_IDS), t5, root), quiet=True)
    before = _files(root / "buckets" / "17x48x48")
    (table.with_name("square.mp4")).unlink()
    grown = table_subset(table, "grown.csv", (*BASE_IDS[:-1], "short"))
    result = build(bucket_config(grown, t5, root), quiet=True, extend=True)
    assert result.removed_ids == ["square"] and result.added_ids == ["short"]
    assert "square" in _rows(root) and _files(root / "buckets" / "17x48x48") == before
    assert verify(root).ok
    # probed again without its record, the gone source would leave its bucket: refused, naming it
    (root / "build" / "probes.pickle").unlink()
    with pytest.raises(LatentforgeError, match=r"1 sample\(s\) of bucket 17x48x48 .*'square'.*--overwrite"):
        build(bucket_config(grown, t5, root), quiet=True, extend=True)
