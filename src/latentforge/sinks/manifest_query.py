"""`latentforge query` and latentforge.query_indices: SQL conditions over a cache's manifest table, for a cache
whose sink keeps one in a local folder (the HDF5 sink's manifest.parquet, sinks/hdf5/query.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..cache.root import RootLike
from ..cache.whole_read import read_whole
from .dispatch import local_hdf5_cache
from .hdf5 import query


def query_rows(root: RootLike, where: str, columns: tuple[str, ...] = ("dataset_index", "sample_id")
               ) -> list[tuple[Any, ...]]:
    """`columns` of the manifest rows that satisfy the SQL `where`, in dataset_index order."""
    # one whole cache's table, even while a build swaps a new one in
    return read_whole(local_hdf5_cache(root, "query"), lambda published: query.query_rows(published, where, columns))


def query_indices(root: str | Path, where: str) -> list[int]:
    """The dataset_index of every row of the cache at `root` that satisfies the SQL condition `where`, e.g.
    `query_indices(root, "caption LIKE '%car%' AND num_frames >= 93")`."""
    return [int(index) for (index,) in query_rows(root, where, ("dataset_index",))]
