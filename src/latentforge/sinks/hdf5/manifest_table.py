"""manifest.parquet: manifest.jsonl as one flat table, so a cache can be filtered with SQL without parsing
its JSON lines (docs/cache-format.md).

Written at commit from the same rows as manifest.jsonl, row i being dataset_index i, and checksummed like every
other file: the bytes depend only on the rows and the pinned pyarrow version. Columns:
- every scalar field of the manifest row (`dataset_index` … `batch`);
- `num_frames` (frames the sample holds), `source_fps`, `source_width`, `source_height` from its provenance;
- `provenance` and `extra` as canonical JSON text (DuckDB's json functions read them);
- `unknown_token_fraction` (double, null where a row does not record it), only in a cache whose rows record it;
- `motion`, `black_fraction`, `brightness` (double) from `provenance.quality`, only in a cache whose rows record it
  (segments: docs/long-videos.md);
- `audio_present` (bool), `audio_start_s`, `audio_end_s` (double, null where no audio covers the window) from
  `provenance.audio`, only in a cache built with sound (docs/audio.md);
- each pass-through column whose values are scalars of one type, under its own name (unless that name is taken).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from ...cache.layout import MANIFEST_TABLE
from ...cache.rows import ManifestRow
from ...errors import REBUILD_OR_FETCH, DamagedFile
from ...io import atomic_path, canonical_json
from .manifest_row_group import RowGroup

_FIXED = pa.schema([
    ("dataset_index", pa.int64()),
    ("source_index", pa.int64()),
    ("sample_id", pa.string()),
    ("shard_path", pa.string()),
    ("cache_row", pa.int64()),
    ("prompt", pa.string()),
    ("prompt_truncated", pa.bool_()),
    ("source_path", pa.string()),
    ("unit", pa.int64()),
    ("batch", pa.int64()),
    ("num_frames", pa.int64()),
    ("source_fps", pa.float64()),
    ("source_width", pa.int64()),
    ("source_height", pa.int64()),
    ("provenance", pa.string()),
    ("extra", pa.string()),
])
FIXED_COLUMNS = tuple(_FIXED.names)
UNKNOWN_TOKENS = "unknown_token_fraction"
QUALITY_COLUMNS = ("motion", "black_fraction", "brightness")  # provenance.quality, where segments scored the rows
# provenance.audio's fields under their column names, where the rows record sound
AUDIO_COLUMNS = {"audio_present": ("present", pa.bool_()), "audio_start_s": ("start_s", pa.float64()),
                 "audio_end_s": ("end_s", pa.float64())}


def _fixed_values(row: ManifestRow) -> dict[str, Any]:
    size = row.provenance.get("source_size") or [None, None]
    return {
        "dataset_index": row.dataset_index, "source_index": row.source_index, "sample_id": row.sample_id,
        "shard_path": row.shard_path, "cache_row": row.cache_row, "prompt": row.prompt,
        "prompt_truncated": row.prompt_truncated, "source_path": row.source_path, "unit": row.unit,
        "batch": row.batch, "num_frames": len(row.provenance.get("frame_indices") or []),
        "source_fps": row.source_fps, "source_width": size[0], "source_height": size[1],
        "provenance": canonical_json(row.provenance), "extra": canonical_json(row.extra),
    }


# Rows converted to Arrow at a time (few, so that few ManifestRow objects live at once; a divisor of the row group),
# and pq.write_table's row group (its default, 1024 * 1024 rows), which the streamed file keeps: the bytes are those
# of the whole table written at once.
CHUNK_ROWS = 2048
_ROW_GROUP_ROWS = 1024 * 1024


def _chunks(rows: Iterable[ManifestRow]) -> Iterator[list[ManifestRow]]:
    chunk: list[ManifestRow] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == CHUNK_ROWS:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _is_scalar(kind: pa.DataType) -> bool:
    return pa.types.is_boolean(kind) or pa.types.is_integer(kind) or pa.types.is_floating(kind) \
        or pa.types.is_string(kind)


def _inferred(values: list[Any]) -> pa.DataType | None:
    """The type pa.array infers for these values; None when they do not make one array."""
    try:
        return pa.array(values).type
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None


@dataclass(frozen=True)
class ManifestColumns:
    """What manifest.parquet holds for some rows: its schema, and which of its columns come from where."""

    schema: pa.Schema
    unknown: bool  # an unknown_token_fraction column from the rows' field
    quality: bool  # the QUALITY_COLUMNS from provenance.quality
    audio: bool = False  # the AUDIO_COLUMNS from provenance.audio; every other column past these is `extra`


def manifest_columns(rows: Iterable[ManifestRow]) -> ManifestColumns:
    """The columns manifest.parquet holds for these rows, found in one pass that keeps a chunk of rows at a time.
    A pass-through column's type is the one pa.array infers from all its values: each chunk's are inferred, and only
    where chunks disagree is the whole column inferred (a pass over `rows` again, one column's values held)."""
    unknown = quality = audio = False
    seen: dict[str, set[pa.DataType] | None] = {}  # pass-through name -> types of its chunks (None: no array)
    for chunk in _chunks(rows):
        unknown = unknown or any(row.unknown_token_fraction is not None for row in chunk)
        quality = quality or any("quality" in row.provenance for row in chunk)
        audio = audio or any("audio" in row.provenance for row in chunk)
        names: dict[str, None] = {}
        for row in chunk:
            names.update(dict.fromkeys(row.extra))
        for name in names:
            types = seen.setdefault(name, set())
            if types is not None:
                kind = _inferred([row.extra.get(name) for row in chunk])
                seen[name] = None if kind is None else types | {kind} - {pa.null()}
    fields = list(_FIXED)
    if unknown:  # a cache without it keeps its bytes
        fields.append(pa.field(UNKNOWN_TOKENS, pa.float64()))
    if quality:  # likewise: only a cache whose rows were scored
        fields.extend(pa.field(name, pa.float64()) for name in QUALITY_COLUMNS)
    if audio:  # likewise: only a cache built with sound
        fields.extend(pa.field(name, kind) for name, (_, kind) in AUDIO_COLUMNS.items())
    taken = {field.name for field in fields}
    for name, types in seen.items():
        if name in taken or not types:
            continue
        kind = next(iter(types)) if len(types) == 1 else _inferred([row.extra.get(name) for row in rows])
        if kind is not None and _is_scalar(kind):
            fields.append(pa.field(name, kind))
    return ManifestColumns(pa.schema(fields), unknown, quality, audio)


def manifest_batches(rows: Iterable[ManifestRow], columns: ManifestColumns) -> Iterator[pa.RecordBatch]:
    """The table's rows as record batches of CHUNK_ROWS rows (the last shorter), in dataset_index order."""
    schema = columns.schema
    derived = (len(FIXED_COLUMNS) + columns.unknown + len(QUALITY_COLUMNS) * columns.quality
               + len(AUDIO_COLUMNS) * columns.audio)
    for chunk in _chunks(rows):
        fixed = [_fixed_values(row) for row in chunk]
        arrays = []
        for position, field in enumerate(schema):
            if position < len(FIXED_COLUMNS):
                values = [values[field.name] for values in fixed]
            elif position >= derived:
                values = [row.extra.get(field.name) for row in chunk]
            elif field.name == UNKNOWN_TOKENS:
                values = [row.unknown_token_fraction for row in chunk]
            elif field.name in AUDIO_COLUMNS:
                key = AUDIO_COLUMNS[field.name][0]
                values = [(row.provenance.get("audio") or {}).get(key) for row in chunk]
            else:
                values = [(row.provenance.get("quality") or {}).get(field.name) for row in chunk]
            arrays.append(pa.array(values, type=field.type))
        yield pa.RecordBatch.from_arrays(arrays, schema=schema)


def manifest_table(rows: Iterable[ManifestRow]) -> pa.Table:
    """The table manifest.parquet holds for these rows (in dataset_index order)."""
    rows = rows if isinstance(rows, Sequence) else list(rows)
    columns = manifest_columns(rows)
    return pa.Table.from_batches(list(manifest_batches(rows, columns)), columns.schema)


def write_manifest_table(root: Path, rows: Iterable[ManifestRow]) -> None:
    """ROOT/manifest.parquet, written completely or not at all, holding one row group of rows at a time. `rows` is
    read twice (the columns, then the values): a sequence, or anything iterable again."""
    columns = manifest_columns(rows)
    schema = columns.schema
    with atomic_path(Path(root) / MANIFEST_TABLE) as tmp, \
            pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
        group, written = RowGroup(schema), 0
        for batch in manifest_batches(rows, columns):
            group.append(batch)
            del batch
            if group.num_rows == _ROW_GROUP_ROWS:
                writer.write_table(group.table())
                group, written = RowGroup(schema), written + 1
        if group.num_rows or not written:  # a table of no rows is written as one empty row group, as pq.write_table
            writer.write_table(group.table())


def open_manifest_table(root: Path) -> pq.ParquetFile:
    """ROOT/manifest.parquet opened for reading a part at a time; DamagedFile when it is not a Parquet file."""
    path = Path(root) / MANIFEST_TABLE
    try:
        return pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as error:
        raise DamagedFile(path, str(error), REBUILD_OR_FETCH) from None


def table_batches(root: Path, table: pq.ParquetFile, batch_size: int, columns: list[str] | None = None
                  ) -> Iterator[pa.RecordBatch]:
    """The rows of an opened manifest.parquet (only `columns`, where given) in batches; DamagedFile when a part of
    the file cannot be read. One thread: threads reading columns side by side each keep their own memory."""
    try:
        for batch in table.iter_batches(batch_size=batch_size, columns=columns, use_threads=False):
            if batch.num_rows:
                yield batch
    except (OSError, pa.ArrowException) as error:
        raise DamagedFile(Path(root) / MANIFEST_TABLE, str(error), REBUILD_OR_FETCH) from None


def read_manifest_table(root: Path) -> pa.Table:
    path = Path(root) / MANIFEST_TABLE
    try:
        return pq.read_table(path)
    except (OSError, pa.ArrowException) as error:
        raise DamagedFile(path, str(error), REBUILD_OR_FETCH) from None
