"""The never-unpublished commit of a WebDataset cache in a local folder and of a bucketed root: readers that open
the cache in a loop while a rerun commits it again, held inside its swap, find a whole cache every time; the rerun
keeps every unchanged file as it was (same inode, same mtime)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from helpers.fake_rows import (
    PLAN_REJECTS,
    empty_prompt_arrays,
    make_cache_config,
    make_samples,
    planned_units,
    stage_units,
)
from helpers.swap_readers import commit_held_in_its_swap, file_identities
from helpers.swap_steps import SwapHeld, bucketed_items, hold_before_swap, read_items, swap_steps
from latentforge import StreamingLatentDataset
from latentforge.cache.bucket_index import BucketIndex
from latentforge.cache.generation_swap import finish_swap, swap_in
from latentforge.cache.rows import read_rejects
from latentforge.sinks.hdf5 import bucket_commit
from latentforge.sinks.hdf5.bucket_commit import commit_bucketed_root
from latentforge.sinks.hdf5.bucketed_dataset import BucketedLatentDataset
from latentforge.sinks.webdataset.commit import WebDatasetOptions, commit_webdataset
from latentforge.transfer import Destination


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
    before = file_identities(root)
    assert len([rel for rel in before if rel.endswith(".tar")]) > 2
    reader = commit_held_in_its_swap(root, commit, _streamed, tmp_path, monkeypatch)
    assert reader.errors == []
    assert reader.samples == {first.num_samples}
    assert file_identities(root) == before  # every object the rerun found with its bytes, linked, not rewritten
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
    before = file_identities(bucketed / "buckets")
    reader = commit_held_in_its_swap(bucketed, lambda: commit_bucketed_root(bucketed, index, rejects),
                                      _bucketed_rows, tmp_path, monkeypatch)
    assert reader.errors == []
    assert reader.samples == {index.num_samples}
    assert file_identities(bucketed / "buckets") == before


def test_a_bucketed_dataset_opened_at_any_step_of_a_rerun_swap_reads_the_whole_root(bucketed, tmp_path, monkeypatch):
    """The rerun's swap stopped after each of its moves: a BucketedLatentDataset opened there reads every item, and
    one opened there but read once the swap is done (its shards no longer in build/swap) reads them too."""
    items = bucketed_items(bucketed)
    monkeypatch.setattr(bucket_commit, "swap_in", hold_before_swap)
    with pytest.raises(SwapHeld):
        commit_bucketed_root(bucketed, BucketIndex.load(bucketed), read_rejects(bucketed))
    steps = 0
    for root in swap_steps(bucketed, tmp_path, monkeypatch, swap_in):
        steps += 1
        opened = BucketedLatentDataset(root)
        assert bucketed_items(root) == items, steps
        finish_swap(root)
        assert read_items(opened) == items, steps
    assert steps == 5  # buckets.json, rejects.jsonl, SHA256SUMS, _CACHE_COMPLETE, then the swap run to its end
