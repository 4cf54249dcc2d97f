"""`latentforge inspect ROOT`: what a cache (or each bucket of a bucketed root) holds, read from its records and
HDF5 metadata (no sample data), once sinks/hdf5/structure.py found the records sound."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py

from ...cache.bucket_index import BucketIndex
from ...cache.hdf5_files import reading
from ...cache.layout import (
    COMPLETE_MARKER,
    EMPTY_PROMPT,
    PUBLISHED_MARKER,
    REJECTS,
    RUN_RECORDS_DIR,
    SHARDS_DIR,
    shard_rows,
)
from ...cache.rows import read_rejects
from ...cache.summary import BuildRecords, CacheSummary, ShardFile
from ...staging.staged_units import staged_payload_bytes
from .structure import check_cache_structure


def _records(root: Path) -> BuildRecords | None:
    folder = root / RUN_RECORDS_DIR
    if not folder.is_dir():
        return None
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    return BuildRecords(size, *staged_payload_bytes(folder))


def _datasets(path: Path) -> dict[str, dict[str, Any]]:
    with reading(path), h5py.File(path, "r") as handle:
        return {
            name: {"dtype": str(ds.dtype), "shape": list(ds.shape), "chunks": list(ds.chunks or ()),
                   "compression": ds.compression}
            for name, ds in handle.items()
        }


def inspect_cache(root: Path) -> CacheSummary:
    """Counts, markers, shards with their rows and sizes, datasets of the first shard, reject reasons, config."""
    root = Path(root)
    config = check_cache_structure(root)
    shard_dir = root / SHARDS_DIR
    shards = []
    for path in sorted(shard_dir.iterdir()) if shard_dir.is_dir() else []:
        rows = shard_rows(path.name)
        if rows is not None:
            shards.append(ShardFile(f"{SHARDS_DIR}/{path.name}", rows[0], rows[1], path.stat().st_size))
    rejects = Counter(r.reason for r in read_rejects(root)) if (root / REJECTS).is_file() else Counter()
    return CacheSummary(
        root=root,
        config=config,
        complete=(root / COMPLETE_MARKER).is_file(),
        published=(root / PUBLISHED_MARKER).is_file(),
        manifest_rows=config.num_samples,  # what check_cache_structure counted
        rejects=dict(sorted(rejects.items())),
        shards=shards,
        datasets=_datasets(root / shards[0].path) if shards else {},
        empty_prompt=_datasets(root / EMPTY_PROMPT) if (root / EMPTY_PROMPT).is_file() else None,
        records=_records(root),
    )


@dataclass(frozen=True)
class BucketedSummary:
    """A bucketed root: its index, markers and root rejects, and each bucket's CacheSummary."""

    root: Path
    index: BucketIndex
    complete: bool
    published: bool
    rejects: dict[str, int]  # rejected before a bucket was chosen
    buckets: dict[str, CacheSummary]  # of the buckets that hold samples, in index order

    def to_json(self) -> dict[str, Any]:
        return {"root": str(self.root), "complete": self.complete, "published": self.published,
                "num_samples": self.index.num_samples, "rejects": self.rejects, "index": self.index.to_json(),
                "buckets": {name: summary.to_json() for name, summary in self.buckets.items()}}


def inspect_bucketed(root: Path, published: Path | None = None) -> BucketedSummary:
    """`published`: the folder holding the root's own files (cache/whole_read.py), the root unless a swap runs; the
    buckets are read at the root, whose files they are in either case."""
    root = Path(root)
    top = Path(published) if published is not None else root
    index = BucketIndex.load(top)
    rejects = Counter(r.reason for r in read_rejects(top)) if (top / REJECTS).is_file() else Counter()
    return BucketedSummary(root, index, (top / COMPLETE_MARKER).is_file(), (top / PUBLISHED_MARKER).is_file(),
                           dict(sorted(rejects.items())),
                           {entry.name: inspect_cache(root / str(entry.path)) for entry in index.filled})
