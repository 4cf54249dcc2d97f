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
- each pass-through column whose values are scalars of one type, under its own name (unless that name is taken).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from ...cache.layout import MANIFEST_TABLE
from ...cache.rows import ManifestRow
from ...errors import REBUILD_OR_FETCH, DamagedFile
from ...io import atomic_path, canonical_json

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


def _passthrough_column(values: list[Any]) -> pa.Array | None:
    """One pass-through column as an Arrow array when its values are scalars of one type, else None."""
    try:
        array = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    kind = array.type
    scalar = pa.types.is_boolean(kind) or pa.types.is_integer(kind) or pa.types.is_floating(kind) \
        or pa.types.is_string(kind)
    return array if scalar else None


def manifest_table(rows: Iterable[ManifestRow]) -> pa.Table:
    """The table manifest.parquet holds for these rows (in dataset_index order)."""
    rows = list(rows)
    fixed = [_fixed_values(row) for row in rows]
    columns = {name: pa.array([values[name] for values in fixed], type=_FIXED.field(name).type)
               for name in FIXED_COLUMNS}
    if any(row.unknown_token_fraction is not None for row in rows):  # a cache without it keeps its bytes
        columns[UNKNOWN_TOKENS] = pa.array([row.unknown_token_fraction for row in rows], type=pa.float64())
    if any("quality" in row.provenance for row in rows):  # likewise: only a cache whose rows were scored
        for name in QUALITY_COLUMNS:
            columns[name] = pa.array([(row.provenance.get("quality") or {}).get(name) for row in rows],
                                     type=pa.float64())
    names: list[str] = []
    for row in rows:
        names.extend(name for name in row.extra if name not in names)
    for name in names:
        if name in columns:
            continue
        array = _passthrough_column([row.extra.get(name) for row in rows])
        if array is not None:
            columns[name] = array
    return pa.table(columns)


def write_manifest_table(root: Path, rows: list[ManifestRow]) -> None:
    """ROOT/manifest.parquet, written completely or not at all."""
    with atomic_path(Path(root) / MANIFEST_TABLE) as tmp:
        pq.write_table(manifest_table(rows), tmp, compression="zstd")


def read_manifest_table(root: Path) -> pa.Table:
    path = Path(root) / MANIFEST_TABLE
    try:
        return pq.read_table(path)
    except (OSError, pa.ArrowException) as error:
        raise DamagedFile(path, str(error), REBUILD_OR_FETCH) from None
