"""A retired unit's arrays, read back from the HDF5 cache it was committed into: how a later commit of the same
root (an extend, a commit resumed after a kill, or one that mends a damaged cache_config.json or manifest) copies
rows whose staged file is gone.

Rows are found by source_index through the shards' own `source_index` datasets, so a damaged manifest does not lose
them, and only in shards whose SHA-256 is one a commit recorded when it wrote them (`shard_digests`): a shard changed
since is never copied into a new commit, which would vouch for its bytes again. A shard that keeps the size and mtime
recorded with its digest (`shard_stats`) is taken to hold it without being read whole again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np

from ..cache.hdf5_files import open_h5
from ..cache.layout import SHARDS_DIR, SOURCE_INDEX_DATASET, ShardSchema
from ..cache.text_rows import padded_row
from ..errors import CacheIntegrityError
from ..hashing import sha256_file
from .staged_units import RowArrays, StagedRow

_FIX = "rebuild the cache with --overwrite (or fetch it again)"


class CommittedRows:
    """Opened on a cache root with the shard schema of the commit about to run and the SHA-256 recorded for each shard
    name; called with a retired unit's rows, it gives that unit's arrays as row views."""

    def __init__(self, root: Path, schema: ShardSchema, shard_digests: dict[str, str],
                 shard_stats: dict[str, list[int]] | None = None):
        self.root, self.schema = Path(root), schema
        self._where: dict[int, tuple[str, int]] = {}
        self._files: dict[str, h5py.File] = {}
        self.lengths: dict[str, int] = {}  # rows of each trusted shard
        self.digests: dict[str, str] = {}  # SHA-256 of each trusted shard, by relative path
        folder = self.root / SHARDS_DIR
        names = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        for name in (n for n in names if n in shard_digests):
            rel = f"{SHARDS_DIR}/{name}"
            found = (self.root / rel).stat()
            unchanged = (shard_stats or {}).get(name) == [found.st_size, found.st_mtime_ns]
            if not unchanged and sha256_file(self.root / rel) != shard_digests[name]:
                continue  # changed since its commit: its rows are not taken from it
            sources = self.file(rel)[SOURCE_INDEX_DATASET][()].tolist()
            self.lengths[rel], self.digests[rel] = len(sources), shard_digests[name]
            for row, source_index in enumerate(sources):
                self._where.setdefault(source_index, (rel, row))

    def place(self, source_index: int) -> tuple[str, int] | None:
        """(shard path, row) of a committed row, None when no trusted shard holds it."""
        return self._where.get(source_index)

    def __call__(self, rows: list[StagedRow]) -> tuple[RowArrays, RowArrays | None, RowArrays | None,
                                                        dict[str, RowArrays]]:
        missing = [r.sample_id for r in rows if r.source_index not in self._where]
        if missing:
            raise CacheIntegrityError(f"{self.root}: samples {missing[:3]} were committed and their staged units "
                                      "retired, but no shard holds them as their commit wrote it (a shard is missing, "
                                      f"damaged or changed), so they cannot be committed again; {_FIX}")
        places = [self._where[r.source_index] for r in rows]
        specs = self.schema.dataset_specs(len(rows))
        latents = _Rows(self, places, self.schema.latent_dataset, *specs[self.schema.latent_dataset])
        conditioning: dict[str, RowArrays] = {s.name: _Rows(self, places, s.name, *specs[s.name])
                                              for s in self.schema.conditioning}
        if self.schema.text_prefix is None:
            return latents, None, None, conditioning
        length = self.schema.length_dataset
        return latents, _TextRows(self, places), _Rows(self, places, length, *specs[length]), conditioning

    def file(self, shard_path: str) -> h5py.File:
        if shard_path not in self._files:
            self._files[shard_path] = open_h5(self.root / shard_path)
        return self._files[shard_path]

    def close(self) -> None:
        for handle in self._files.values():
            handle.close()
        self._files.clear()


class _Rows:
    """One dataset's rows of a retired unit, sliced as a staged unit's h5py dataset is."""

    def __init__(self, rows: CommittedRows, places: list[tuple[str, int]], name: str, dtype: np.dtype,
                 shape: tuple[int, ...]):
        self._rows, self._places, self._name = rows, places, name
        self.dtype, self.shape = np.dtype(dtype), tuple(shape)

    def row(self, shard_path: str, cache_row: int) -> np.ndarray:
        return self._rows.file(shard_path)[self._name][cache_row]

    def __getitem__(self, index: Any) -> np.ndarray:
        if isinstance(index, slice):
            picked = self._places[index]
            return np.stack([self.row(*place) for place in picked]) if picked else \
                np.empty((0, *self.shape[1:]), self.dtype)
        return self.row(*self._places[index])


class _TextRows(_Rows):
    """The text embeddings, zero-padded to [max_length, D] as staged units hold them, whichever layout the shards
    keep (padded or trimmed)."""

    def __init__(self, rows: CommittedRows, places: list[tuple[str, int]]):
        schema = rows.schema
        super().__init__(rows, places, schema.embeddings_dataset, np.dtype(schema.storage_dtype),
                         (len(places), schema.max_length, schema.text_dim))

    def row(self, shard_path: str, cache_row: int) -> np.ndarray:
        schema = self._rows.schema
        embeddings, _ = padded_row(self._rows.file(shard_path), schema.embeddings_dataset, schema.length_dataset,
                                   cache_row, schema.max_length, schema.text_dim)
        return embeddings
