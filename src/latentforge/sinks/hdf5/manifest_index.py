"""manifest.jsonl reduced to what a DataLoader needs per item, in flat arrays.

Arrays instead of lists of dicts and Python strings: with forked DataLoader workers every touched
Python object gets its refcount written, which copies its memory page into each worker; one bytes blob plus
offsets stays shared. It also pickles fast for spawned workers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...cache.layout import MANIFEST
from ...cache.rows import read_manifest
from ...errors import REBUILD_OR_FETCH, CacheIntegrityError


@dataclass(frozen=True)
class StringTable:
    """Strings stored as one UTF-8 blob and int64 offsets."""

    blob: bytes
    offsets: np.ndarray  # int64 [n + 1]

    @classmethod
    def of(cls, strings: list[str]) -> "StringTable":
        encoded = [s.encode("utf-8") for s in strings]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(e) for e in encoded], out=offsets[1:])
        return cls(b"".join(encoded), offsets)

    def __getitem__(self, index: int) -> str:
        return self.blob[self.offsets[index] : self.offsets[index + 1]].decode("utf-8")

    def __len__(self) -> int:
        return len(self.offsets) - 1


@dataclass(frozen=True)
class ManifestIndex:
    """Per dataset_index: where the row lives and what it is."""

    shard_paths: tuple[str, ...]  # distinct shard paths relative to the root, in first-seen order
    shard_of: np.ndarray  # int32 [N]: index into shard_paths
    cache_row: np.ndarray  # int64 [N]
    source_index: np.ndarray  # int64 [N]
    sample_id: StringTable
    prompt: StringTable
    source_path: StringTable
    source_fps: np.ndarray  # float64 [N]; NaN where the manifest has no provenance.source_fps

    def __len__(self) -> int:
        return len(self.cache_row)


def read_manifest_index(root: Path, num_samples: int) -> ManifestIndex:
    """Read ROOT/manifest.jsonl; raise CacheIntegrityError when it breaks the manifest contract."""
    path = root / MANIFEST
    shard_ids: dict[str, int] = {}
    shard_of, cache_row, source_index, source_fps = [], [], [], []
    sample_ids, prompts, source_paths = [], [], []
    for line_number, row in enumerate(read_manifest(root)):
        if row.dataset_index != line_number:
            raise CacheIntegrityError(f"{path} line {line_number + 1}: dataset_index {row.dataset_index!r}, expected "
                                      f"{line_number}; {REBUILD_OR_FETCH}")
        shard = row.shard_path
        if shard.startswith("/") or ".." in Path(shard).parts:
            raise CacheIntegrityError(f"{path} line {line_number + 1}: shard_path {shard!r} leaves the root; "
                                      f"{REBUILD_OR_FETCH}")
        shard_of.append(shard_ids.setdefault(shard, len(shard_ids)))
        cache_row.append(row.cache_row)
        source_index.append(row.source_index)
        sample_ids.append(row.sample_id)
        prompts.append(row.prompt or "")
        source_paths.append(row.source_path or "")
        fps = row.source_fps
        source_fps.append(math.nan if fps is None else fps)
    if len(cache_row) != num_samples:
        raise CacheIntegrityError(f"{path} has {len(cache_row)} rows but cache_config.json promises "
                                  f"num_samples={num_samples}; {REBUILD_OR_FETCH}")
    return ManifestIndex(
        shard_paths=tuple(shard_ids),
        shard_of=np.asarray(shard_of, dtype=np.int32),
        cache_row=np.asarray(cache_row, dtype=np.int64),
        source_index=np.asarray(source_index, dtype=np.int64),
        sample_id=StringTable.of(sample_ids),
        prompt=StringTable.of(prompts),
        source_path=StringTable.of(source_paths),
        source_fps=np.asarray(source_fps, dtype=np.float64),
    )
