"""SQL over a cache's manifest.parquet: which dataset_index values match a WHERE clause.

The table is read with pyarrow and handed to an in-memory DuckDB that may not touch any file afterwards, so a
clause can only read the manifest. The clause is parsed as one expression (DuckDB's relation `filter`), never
pasted into a statement: a `)` that closes the condition, a `;`, a `UNION` or a comment that would escape it is a
parse error, refused with one line. `caption` is another name for `prompt` (the text the cache encoded).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...cache.layout import MANIFEST_TABLE
from ...cache.root import CacheRoot
from ...errors import ConfigError
from .manifest_table import read_manifest_table
from .structure import check_cache_structure

TABLE = "manifest"


def _duckdb():
    try:
        import duckdb
    except ImportError:
        raise ConfigError("querying a manifest needs duckdb; install it with `pip install duckdb`") from None
    return duckdb


def _connect(root: Path):
    duckdb = _duckdb()
    table = read_manifest_table(root)
    con = duckdb.connect(":memory:")
    con.register("manifest_arrow", table)
    alias = "" if "caption" in table.column_names else ", prompt AS caption"
    con.execute(f"CREATE TABLE {TABLE} AS SELECT *{alias} FROM manifest_arrow")
    con.unregister("manifest_arrow")
    con.execute("SET enable_external_access = false")
    return con


def query_rows(root: str | Path, where: str, columns: tuple[str, ...] = ("dataset_index", "sample_id")
               ) -> list[tuple[Any, ...]]:
    """`columns` of the rows of ROOT/manifest.parquet that satisfy the SQL `where`, in dataset_index order."""
    root = CacheRoot.of(root).local_folder("query")
    if not (root / MANIFEST_TABLE).is_file():
        raise ConfigError(f"{root} has no {MANIFEST_TABLE}; give a cache root (a bucketed root's caches are under "
                          "buckets/<name>), or rebuild a cache written before the index existed")
    if not where.strip():
        raise ConfigError("the query is empty; give a condition such as \"caption LIKE '%car%'\"")
    check_cache_structure(root)
    con = _connect(root)
    try:
        matching = con.table(TABLE).filter(where)  # parsed as a single expression, or refused
        return matching.order("dataset_index").project(", ".join(f'"{c}"' for c in columns)).fetchall()
    except _duckdb().ParserException as error:
        raise ConfigError(f"query {where!r} is not one SQL condition ({str(error).splitlines()[0]}); give a single "
                          "condition over the manifest's columns, such as \"caption LIKE '%car%'\" (no ')' closing "
                          "it, no ';', UNION or statement after it)") from None
    except _duckdb().Error as error:
        names = ", ".join(name for name, *_ in con.execute(f"DESCRIBE {TABLE}").fetchall())
        message = str(error).splitlines()[0]
        raise ConfigError(f"query {where!r} does not run on {root / MANIFEST_TABLE}: {message}; the columns are "
                          f"{names}") from None
    finally:
        con.close()


def query_indices(root: Path, where: str) -> list[int]:
    """The dataset_index of every row of the cache at `root` that satisfies the SQL condition `where`, e.g.
    `query_indices(root, "caption LIKE '%car%' AND num_frames >= 93")`."""
    return [int(index) for (index,) in query_rows(root, where, ("dataset_index",))]
