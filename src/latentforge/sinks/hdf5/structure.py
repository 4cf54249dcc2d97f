"""The check every reader runs before it trusts a cache (inspect, query, stats, export, preview and the
Datasets): its records parse and agree with its shards.

- cache_config.json parses, and its num_shards is what num_samples at rows_per_shard make;
- every shard file it names is present;
- manifest.jsonl has one line per sample, the first and the last parse as rows 0 and N-1 (a file cut short or
  overwritten fails there);
- manifest.parquet, where the cache has one, parses and has one row per sample.

Cheap on purpose: one pass over manifest.jsonl's bytes (none when the caller parses every line itself), the
Parquet footer and a stat per shard; no shard is opened and nothing is hashed. `latentforge verify` proves the
rest (every row, checksum and dataset).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ...cache.config_file import CacheConfig
from ...cache.layout import CACHE_CONFIG, MANIFEST, MANIFEST_TABLE
from ...cache.rows import ManifestRow
from ...errors import REBUILD_OR_FETCH, CacheIntegrityError, DamagedFile
from .manifest_table import FIXED_COLUMNS


def check_cache_structure(root: str | Path, manifest_lines: bool = True) -> CacheConfig:
    """The cache's config, once its records are found to parse and agree with its shards; DamagedFile or
    CacheIntegrityError naming the file and the fix otherwise. `manifest_lines=False` leaves manifest.jsonl's
    lines to a caller that parses every one of them (the Datasets)."""
    root = Path(root)
    config = CacheConfig.load(root)
    _check_shards(root, config)
    if manifest_lines:
        _check_manifest_lines(root / MANIFEST, config.num_samples)
    if (root / MANIFEST_TABLE).is_file():
        _check_manifest_table(root / MANIFEST_TABLE, config.num_samples)
    return config


def _check_shards(root: Path, config: CacheConfig) -> None:
    shards = config.shard_paths()
    if config.num_shards != len(shards):
        raise DamagedFile(root / CACHE_CONFIG, f"num_shards={config.num_shards}, but {config.num_samples} samples at "
                          f"{config.rows_per_shard} per shard make {len(shards)}", REBUILD_OR_FETCH)
    missing = [rel for rel, _, _ in shards if not (root / rel).is_file()]
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise CacheIntegrityError(f"{root / missing[0]}{more} missing: {CACHE_CONFIG} names {len(shards)} "
                                  f"shard(s); {REBUILD_OR_FETCH}")


def _check_manifest_lines(path: Path, num_samples: int) -> None:
    first = last = b""
    count = 0
    try:
        with open(path, "rb") as handle:
            for count, line in enumerate(handle, start=1):
                first = first or line
                last = line
    except FileNotFoundError:
        raise CacheIntegrityError(f"{path} is missing; {REBUILD_OR_FETCH}") from None
    if count != num_samples:
        raise DamagedFile(path, f"{count} lines, but {CACHE_CONFIG} promises num_samples={num_samples}",
                          REBUILD_OR_FETCH)
    for number, line in ((1, first), (count, last)) if count else ():
        try:
            row = ManifestRow.from_json(json.loads(line.decode("utf-8")))
        except ValueError as error:  # not UTF-8, not JSON, not a row
            raise DamagedFile(path, f"line {number} is not a row: {error}", REBUILD_OR_FETCH) from None
        if row.dataset_index != number - 1:
            raise DamagedFile(path, f"line {number} holds dataset_index {row.dataset_index!r}", REBUILD_OR_FETCH)


def _check_manifest_table(path: Path, num_samples: int) -> None:
    try:
        metadata = pq.ParquetFile(path).metadata
    except (OSError, pa.ArrowException) as error:
        raise DamagedFile(path, str(error), REBUILD_OR_FETCH) from None
    absent = [name for name in FIXED_COLUMNS if name not in metadata.schema.names]
    if absent:
        raise DamagedFile(path, f"no column {', '.join(absent)}", REBUILD_OR_FETCH)
    if metadata.num_rows != num_samples:
        raise DamagedFile(path, f"{metadata.num_rows} rows, but {CACHE_CONFIG} promises num_samples={num_samples}",
                          REBUILD_OR_FETCH)
