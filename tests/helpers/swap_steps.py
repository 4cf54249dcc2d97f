"""A commit's swap stopped after each of its moves in turn, and a bucketed root's items read whole: what the tests of
a BucketedLatentDataset opened at any moment of a rerun's or an extend's swap share
(tests/builder/test_generation_swap_roots.py, tests/builder/test_bucket_extend.py)."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import Callable, Iterator

import torch

from latentforge.sinks.hdf5.bucketed_dataset import BucketedLatentDataset
from latentforge.testing import fault_points

Item = tuple[str, str, int, str]  # (bucket, sample_id, dataset_index, sha256 of every other field)


class SwapHeld(Exception):
    """Raised in place of a commit's swap, to leave the commit where its swap would start."""


def hold_before_swap(root: Path) -> None:
    raise SwapHeld(root)


def _digest(item: dict) -> str:
    digest = hashlib.sha256()
    for key in sorted(item):
        value = item[key]
        digest.update(key.encode())
        digest.update(value.numpy().tobytes() if isinstance(value, torch.Tensor) else repr(value).encode())
    return digest.hexdigest()


def read_items(dataset: BucketedLatentDataset) -> list[Item]:
    """Every item of `dataset` in index order, then its shards closed."""
    try:
        return [(item["bucket"], item["sample_id"], int(item["dataset_index"]), _digest(item))
                for item in (dataset[index] for index in range(len(dataset)))]
    finally:
        for bucket in dataset.buckets.values():
            bucket.close()


def bucketed_items(root: Path) -> list[Item]:
    return read_items(BucketedLatentDataset(root))


def linked_copy(source: Path, target: Path) -> Path:
    """A copy of the folder `source` whose files linked to each other stay so (as `cp -a` copies them)."""
    subprocess.run(["cp", "-a", str(source), str(target)], check=True)
    return target


def swap_steps(held: Path, tmp_path: Path, monkeypatch, swap: Callable[[Path], object]) -> Iterator[Path]:
    """Linked copies of `held` (a root whose commit waits in build/next) in which swap(copy) stopped after its first
    move, its second, ..., and last one in which it ran to the end."""
    step = 1
    while True:
        root = linked_copy(held, tmp_path / f"swap-step-{step}")
        monkeypatch.setenv(fault_points.FAULT_ENV, f"swap:{step}:raise")
        monkeypatch.setattr(fault_points, "_arrivals", {})
        try:
            swap(root)
        except fault_points.InjectedFault:
            stopped = True
        else:
            stopped = False
        finally:
            monkeypatch.delenv(fault_points.FAULT_ENV)
        yield root
        if not stopped:
            return
        step += 1
