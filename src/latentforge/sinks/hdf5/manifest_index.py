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
import pyarrow as pa
import pyarrow.compute as pc

from ...cache.layout import MANIFEST, MANIFEST_TABLE
from ...cache.rows import read_manifest
from ...errors import REBUILD_OR_FETCH, CacheIntegrityError
from .manifest_table import open_manifest_table, table_batches


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
    """The index of ROOT's manifest: from manifest.parquet's columns where the cache has it (no JSON parsed, about
    the index's own size held), else from manifest.jsonl's lines; CacheIntegrityError when it breaks the manifest
    contract."""
    if (Path(root) / MANIFEST_TABLE).is_file():
        return _index_of_table(Path(root), num_samples)
    return _index_of_lines(Path(root), num_samples)


def _index_of_lines(root: Path, num_samples: int) -> ManifestIndex:
    """A cache written before manifest.parquet existed: every line of manifest.jsonl parsed."""
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


class _Strings:
    """A string column gathered a batch at a time into one UTF-8 blob and its offsets (no Python str per row)."""

    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        self.lengths: list[np.ndarray] = []

    def add(self, column: pa.Array) -> None:
        column = pc.fill_null(column, "")  # the JSON path reads a missing prompt or source path as ""
        if not pa.types.is_large_string(column.type):
            column = column.cast(pa.large_string())
        _, offsets, data = column.buffers()
        ends = np.frombuffer(offsets, dtype=np.int64)[column.offset: column.offset + len(column) + 1]
        self.pieces.append(data[ends[0]: ends[-1]].to_pybytes() if data is not None else b"")
        self.lengths.append(np.diff(ends))

    def table(self) -> StringTable:
        offsets = np.zeros(sum(map(len, self.lengths)) + 1, dtype=np.int64)
        if len(offsets) > 1:
            np.cumsum(np.concatenate(self.lengths), out=offsets[1:])
        blob, self.pieces = b"".join(self.pieces), []
        return StringTable(blob, offsets)


def _index_of_table(root: Path, num_samples: int) -> ManifestIndex:
    """manifest.parquet's index columns, read a column and a batch at a time. The table holds manifest.jsonl's rows
    (verify checks it); the messages name manifest.jsonl's lines, as the JSON path would."""
    path = root / MANIFEST
    table = open_manifest_table(root)
    numbers: dict[str, list[np.ndarray]] = {name: [] for name in _NUMBERS}
    strings = {name: _Strings() for name in _STRINGS}
    shard_paths: dict[str, int] = {}
    shard_of: list[np.ndarray] = []
    try:  # a column at a time: the reader holds one decoded column, not the row group's
        for name, kind in _NUMBERS.items():
            fill = math.nan if kind == np.float64 else -1
            for batch in table_batches(root, table, _BATCH_ROWS, columns=[name]):
                numbers[name].append(batch.column(0).fill_null(fill).to_numpy(zero_copy_only=False).astype(kind))
        for name in _STRINGS:
            for batch in table_batches(root, table, _BATCH_ROWS, columns=[name]):
                strings[name].add(batch.column(0))
        for batch in table_batches(root, table, _BATCH_ROWS, columns=["shard_path"]):
            shards = pc.dictionary_encode(batch.column(0))  # dictionary in first-seen order
            ids = np.array([shard_paths.setdefault(shard, len(shard_paths))
                            for shard in shards.dictionary.to_pylist()], dtype=np.int32)
            shard_of.append(ids[shards.indices.to_numpy(zero_copy_only=False)])
    finally:
        table.close()
    arrays = {name: np.concatenate(parts) if parts else np.zeros(0, dtype=_NUMBERS[name])
              for name, parts in numbers.items()}
    shard_array = np.concatenate(shard_of) if shard_of else np.zeros(0, dtype=np.int32)
    wrong = np.flatnonzero(arrays["dataset_index"] != np.arange(len(arrays["dataset_index"])))
    first_wrong = int(wrong[0]) if len(wrong) else None
    for shard, number in shard_paths.items():
        if not (shard.startswith("/") or ".." in Path(shard).parts):
            continue
        first = int(np.argmax(shard_array == number))
        if first_wrong is None or first < first_wrong:
            raise CacheIntegrityError(f"{path} line {first + 1}: shard_path {shard!r} leaves the root; "
                                      f"{REBUILD_OR_FETCH}")
    if first_wrong is not None:
        raise CacheIntegrityError(f"{path} line {first_wrong + 1}: dataset_index "
                                  f"{int(arrays['dataset_index'][first_wrong])!r}, expected {first_wrong}; "
                                  f"{REBUILD_OR_FETCH}")
    if len(shard_array) != num_samples:
        raise CacheIntegrityError(f"{path} has {len(shard_array)} rows but cache_config.json promises "
                                  f"num_samples={num_samples}; {REBUILD_OR_FETCH}")
    return ManifestIndex(
        shard_paths=tuple(shard_paths),
        shard_of=shard_array,
        cache_row=arrays["cache_row"],
        source_index=arrays["source_index"],
        sample_id=strings["sample_id"].table(),
        prompt=strings["prompt"].table(),
        source_path=strings["source_path"].table(),
        source_fps=arrays["source_fps"],
    )


_NUMBERS = {"dataset_index": np.int64, "cache_row": np.int64, "source_index": np.int64, "source_fps": np.float64}
_STRINGS = ("sample_id", "prompt", "source_path")
_BATCH_ROWS = 1 << 16
