"""The part files of a table: globs expanded to sorted files, each read as CSV, JSONL or Parquet through pyarrow,
and the pass-through columns turned into values strict JSON can hold."""

from __future__ import annotations

import glob
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pa_parquet

from ..errors import ConfigError

TABLE_FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}


def table_parts(patterns: list[str]) -> list[Path]:
    """Expand files and globs into the sorted list of part files (a file named twice is read once)."""
    parts: set[Path] = set()
    for pattern in patterns:
        if glob.has_magic(pattern):
            matches = [Path(m) for m in glob.glob(pattern, recursive=True)]
            if not matches:
                raise ConfigError(f"dataset.path glob {pattern!r} matches no file")
            parts.update(m.absolute() for m in matches)
        elif Path(pattern).is_file():
            parts.add(Path(pattern).absolute())
        else:
            raise ConfigError(f"dataset.path {pattern!r} is not a file; give a .csv/.jsonl/.parquet table or a glob")
    for part in parts:
        if part.suffix.lower() not in TABLE_FORMATS:
            raise ConfigError(f"table {part}: unknown format {part.suffix!r}; allowed: {', '.join(TABLE_FORMATS)}")
    return sorted(parts, key=str)


def read_table(path: Path, text_columns: list[str]) -> pa.Table:
    """Read one part file; `text_columns` are read as strings in CSV so "007" stays "007"."""
    kind = TABLE_FORMATS[path.suffix.lower()]
    try:
        if kind == "csv":
            convert = pa_csv.ConvertOptions(
                column_types={name: pa.string() for name in text_columns},
                # Only an unquoted empty cell is null: "NA" or "null" are real captions, and a quoted ""
                # is the empty string, which is how pyarrow.csv.write_csv tells null from "".
                null_values=[""],
                strings_can_be_null=True,
                quoted_strings_can_be_null=False,
                timestamp_parsers=[],  # dates stay text, as JSON would hold them
            )
            return pa_csv.read_csv(path, convert_options=convert)
        if kind == "jsonl":
            table = pa_json.read_json(path)
            temporal = [f for f in table.schema if pa.types.is_temporal(f.type)]
            if not temporal:
                return table
            # pyarrow infers timestamps from ISO strings; read those columns again as the text they are
            schema = pa.schema([pa.field(f.name, pa.string()) for f in temporal])
            options = pa_json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="infer")
            return pa_json.read_json(path, parse_options=options)
        return pa_parquet.read_table(path)
    except (pa.ArrowInvalid, OSError) as error:
        raise ConfigError(f"table {path} cannot be read as {kind}: {error}") from None


def json_column(table: pa.Table, name: str, path: Path) -> pa.ChunkedArray:
    """A pass-through column whose values JSON can hold (Parquet dates/times become ISO-like text)."""
    column = table.column(name)
    kind = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
    if pa.types.is_temporal(kind):
        return column.cast(pa.string())
    if _json_type(kind):
        return column
    raise ConfigError(f"table {path}: pass-through column {name!r} has type {kind}, which JSON cannot hold; "
                      "cast it to string, number or boolean")


def _json_type(kind: pa.DataType) -> bool:
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _json_type(kind.value_type)
    if pa.types.is_struct(kind):
        return all(_json_type(kind.field(i).type) for i in range(kind.num_fields))
    return any(check(kind) for check in (pa.types.is_integer, pa.types.is_floating, pa.types.is_boolean,
                                         pa.types.is_string, pa.types.is_large_string, pa.types.is_null))


def without_nan(value: Any) -> Any:
    """NaN becomes null: pandas stores a missing number as NaN, and the manifest is strict JSON."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, list):
        return [without_nan(v) for v in value]
    if isinstance(value, dict):
        return {k: without_nan(v) for k, v in value.items()}
    return value
