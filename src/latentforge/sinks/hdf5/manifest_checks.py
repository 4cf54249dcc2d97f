"""verify's checks of manifest.jsonl and manifest.parquet, read a line (and a chunk of table rows) at a time.

What a later check needs of the manifest is kept in flat arrays, not per-row objects: the source_index of each
dataset_index (int64, -1 where the row did not parse or its source_index does not increase) and a 64-bit hash of
each sample_id (the duplicate check), so memory grows by 16 bytes a row, whatever the manifest's size.
"""

from __future__ import annotations

import array
import bisect
import codecs
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa

from ...cache.check_report import CheckRecorder
from ...cache.conditioning_streams import CONDITIONING_CHECK, condition_frame_problem
from ...cache.layout import MANIFEST, MANIFEST_TABLE
from ...cache.rows import MANIFEST_KEYS, ManifestRow, read_manifest
from ...errors import CacheIntegrityError, DamagedFile
from .manifest_table import CHUNK_ROWS, manifest_batches, manifest_columns, open_manifest_table, table_batches

Shards = list[tuple[str, int, int]]
_BLOCK = 1 << 20


@dataclass(frozen=True)
class ManifestFacts:
    """What the shard and rejects checks need of the manifest."""

    source_of: np.ndarray  # int64 [num_samples]: the manifest's source_index per dataset_index; -1 where unknown
    units: set[int]

    def source_index(self, index: int) -> int | None:
        if 0 <= index < len(self.source_of) and self.source_of[index] >= 0:
            return int(self.source_of[index])
        return None

    def accepted(self) -> "SortedInts":
        return SortedInts(np.unique(self.source_of[self.source_of >= 0]))


@dataclass(frozen=True)
class SortedInts:
    """`in` over a sorted int64 array (the accepted source indices), without a Python set of them."""

    values: np.ndarray

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, (int, np.integer)):
            return False
        at = int(np.searchsorted(self.values, value))
        return at < len(self.values) and int(self.values[at]) == value


def _undecodable(path: Path) -> UnicodeDecodeError | None:
    """The first UTF-8 error in the file, found a block at a time (the lines are read only once it decodes)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        with open(path, "rb") as handle:
            while block := handle.read(_BLOCK):
                decoder.decode(block)
            decoder.decode(b"", final=True)
    except UnicodeDecodeError as error:
        return error
    return None


def _lines(path: Path) -> Iterator[str]:
    with open(path, "rb") as handle:
        for raw in handle:
            yield raw.rstrip(b"\n").decode("utf-8")


def check_manifest(root: Path, num_samples: int, shards: Shards, rec: CheckRecorder, conditioned: bool = False
                   ) -> ManifestFacts:
    """Every row canonical and dense, at the place the shard boundaries give it, source_index increasing, sample_id
    unique, condition_frame where the cache is conditioned; the facts the later checks need."""
    facts = ManifestFacts(np.full(num_samples, -1, dtype=np.int64), set())
    starts = [start for _, start, _ in shards]
    total = shards[-1][2] if shards else 0
    path = root / MANIFEST
    try:
        problem = _undecodable(path)
    except OSError as exc:
        problem = exc
    if problem is not None:
        rec.fail("manifest", f"{MANIFEST} cannot be read: {problem!r}")
        return facts
    dense, previous_source, id_hashes, count = True, -1, array.array("q"), 0
    for line_no, line in enumerate(_lines(path)):
        count += 1
        try:
            row = ManifestRow.from_line(line)
        except (ValueError, TypeError):
            rec.fail("manifest", f"line {line_no + 1} is not a canonical row with keys {', '.join(MANIFEST_KEYS)}",
                     line_no if dense else None)
            continue
        index = row.dataset_index
        facts.units.add(row.unit)
        if dense and index != line_no:
            dense = False
            rec.fail("manifest", f"line {line_no + 1} has dataset_index {index!r}, expected {line_no}: "
                     f"dataset_index {line_no} is missing or out of order", line_no)
        if not isinstance(index, int) or not 0 <= index < total:
            rec.fail("manifest", f"line {line_no + 1}: dataset_index {index!r} outside 0..{num_samples - 1}")
            continue
        shard_path, start, _ = shards[bisect.bisect_right(starts, index) - 1]
        if (row.shard_path, row.cache_row) != (shard_path, index - start):
            rec.fail("manifest", f"dataset_index {index}: shard_path/cache_row {row.shard_path}/{row.cache_row}"
                     f" but the shard boundaries put it at {shard_path}/{index - start}", index)
        if not isinstance(row.source_index, int) or row.source_index <= previous_source:
            rec.fail("manifest", f"dataset_index {index}: source_index {row.source_index!r} does not increase", index)
        else:
            previous_source = row.source_index
            if index < num_samples:
                facts.source_of[index] = row.source_index
        if problem := condition_frame_problem(conditioned, row.condition_frame, row.frame_indices):
            rec.fail(CONDITIONING_CHECK, f"dataset_index {index}: {problem}", index)
        id_hashes.append(hash(row.sample_id))
    _check_sample_ids(path, total, id_hashes, rec)
    if count != num_samples:
        rec.fail("manifest", f"{MANIFEST} has {count} rows, cache_config num_samples is {num_samples}")
    rec.close("manifest", f"{num_samples} rows, dense dataset_index, shard_path/cache_row agree with the shards")
    return facts


def _check_sample_ids(path: Path, total: int, id_hashes: array.array, rec: CheckRecorder) -> None:
    """No sample_id twice. The first pass kept only each id's 64-bit hash; the ids whose hash repeats (a repeated
    id, or very rarely two ids of one hash) are compared in a second pass over just those lines."""
    hashes, counts = np.unique(np.frombuffer(id_hashes, dtype=np.int64), return_counts=True)
    repeated = set(hashes[counts > 1].tolist())
    if not repeated:
        return
    seen: set[str] = set()
    for line in _lines(path):
        try:
            row = ManifestRow.from_line(line)
        except (ValueError, TypeError):
            continue
        index = row.dataset_index
        if not isinstance(index, int) or not 0 <= index < total or hash(row.sample_id) not in repeated:
            continue
        if row.sample_id in seen:
            rec.fail("manifest", f"dataset_index {index}: sample_id {row.sample_id!r} appears twice", index)
        seen.add(row.sample_id)


class _ManifestFile:
    """manifest.jsonl's rows, readable again (the table's columns take one pass, its values another)."""

    def __init__(self, root: Path):
        self.root = root

    def __iter__(self) -> Iterator[ManifestRow]:
        return read_manifest(self.root)


def check_manifest_table(root: Path, rec: CheckRecorder) -> None:
    """manifest.parquet holds exactly the table manifest.jsonl's rows make (absent in caches written before it),
    compared a chunk of rows at a time."""
    if not (root / MANIFEST_TABLE).is_file():
        rec.warn("manifest_table", f"no {MANIFEST_TABLE} (a cache written before the index existed): "
                 "`latentforge query` needs it; rebuild the cache to add it")
        return
    rows = _ManifestFile(root)
    try:
        columns = manifest_columns(rows)
    except (OSError, ValueError, TypeError, KeyError, CacheIntegrityError):
        return  # the manifest check names the broken line
    try:
        got = open_manifest_table(root)
    except CacheIntegrityError as error:
        rec.fail("manifest_table", str(error))
        return
    try:
        same = got.schema_arrow.equals(columns.schema) and _same_rows(
            table_batches(root, got, CHUNK_ROWS), manifest_batches(rows, columns))
    except DamagedFile as error:
        if Path(error.path) != root / MANIFEST_TABLE:
            return  # manifest.jsonl changed under the check; the manifest check names it
        rec.fail("manifest_table", str(error))
        return
    except (OSError, ValueError, TypeError, KeyError):
        return
    finally:
        got.close()
    if not same:
        rec.fail("manifest_table", f"{MANIFEST_TABLE} does not hold the rows of {MANIFEST} "
                 f"({got.metadata.num_rows} rows, columns {got.schema_arrow.names}); rebuild the cache")
    rec.close("manifest_table", f"{MANIFEST_TABLE} holds the rows of {MANIFEST}")


def _same_rows(got: Iterator[pa.RecordBatch], want: Iterator[pa.RecordBatch]) -> bool:
    """Whether both streams hold the same rows, however each is cut into batches."""
    pending: list[pa.RecordBatch] = []
    held = 0
    for batch in want:
        while held < batch.num_rows:
            more = next(got, None)
            if more is None:
                return False
            pending.append(more)
            held += more.num_rows
        table = pa.Table.from_batches(pending)
        if not table.slice(0, batch.num_rows).equals(pa.Table.from_batches([batch])):
            return False
        rest = table.slice(batch.num_rows)
        pending, held = rest.to_batches(), rest.num_rows
    return held == 0 and next(got, None) is None
