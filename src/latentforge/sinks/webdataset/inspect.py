"""`latentforge inspect` of a WebDataset cache, local or at an fsspec URL: the summary an HDF5 cache gets,
read from cache_config.json, the manifest, rejects.jsonl, the markers and the object listing (no tar is read)."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from ...cache.config_file import CacheConfig
from ...cache.layout import CACHE_CONFIG, COMPLETE_MARKER, MANIFEST, PUBLISHED_MARKER, REJECTS
from ...cache.summary import CacheSummary, ShardFile
from ...errors import REBUILD_OR_FETCH, CacheIntegrityError, DamagedFile
from ...storage import Storage
from .layout import EMPTY_PROMPT_TAR

_TAR_NAME = re.compile(r"^shards/part-\d{5}-of-\d{5}-(\d{9})-(\d{9})\.tar$")


def inspect_webdataset(url: str, storage_options: dict[str, Any] | None = None) -> CacheSummary:
    store = Storage(url, dict(storage_options or {}))
    present = store.list_files()
    if CACHE_CONFIG not in present:
        raise CacheIntegrityError(f"{url} has no {CACHE_CONFIG}; give the root of a WebDataset cache")
    raw_config = _json(store, url, CACHE_CONFIG)
    config = CacheConfig.from_json(raw_config)
    shards = []
    for rel in sorted(present):
        match = _TAR_NAME.match(rel)
        if match:
            shards.append(ShardFile(rel, int(match.group(1)), int(match.group(2)), present[rel]))
    if len(shards) != config.num_shards:
        raise CacheIntegrityError(f"{url} holds {len(shards)} tar shard(s), but {CACHE_CONFIG} names "
                                  f"{config.num_shards}; {REBUILD_OR_FETCH}")
    manifest_rows = len(store.read(MANIFEST).splitlines()) if MANIFEST in present else 0
    if manifest_rows != config.num_samples:
        raise DamagedFile(_name(url, MANIFEST), f"{manifest_rows} lines, but {CACHE_CONFIG} promises num_samples="
                          f"{config.num_samples}", REBUILD_OR_FETCH)
    rejects = Counter(_reason(url, row) for row in _json_lines(store, url, REJECTS)) \
        if REJECTS in present else Counter()
    sink = raw_config.get("sink") or {}
    return CacheSummary(
        root=url,
        config=config,
        complete=COMPLETE_MARKER in present,
        published=PUBLISHED_MARKER in present,
        manifest_rows=manifest_rows,
        rejects=dict(sorted(rejects.items())),
        shards=shards,
        datasets={"sink": dict(sink)},
        empty_prompt={EMPTY_PROMPT_TAR: {"bytes": present[EMPTY_PROMPT_TAR]}} if EMPTY_PROMPT_TAR in present else None,
    )


def _name(url: str, rel: str) -> str:
    return f"{url.rstrip('/')}/{rel}"


def _text(store: Storage, url: str, rel: str) -> str:
    try:
        return store.read(rel).decode("utf-8")
    except UnicodeDecodeError as error:
        raise DamagedFile(_name(url, rel), str(error), REBUILD_OR_FETCH) from None


def _json(store: Storage, url: str, rel: str) -> Any:
    try:
        return json.loads(_text(store, url, rel))
    except ValueError as error:
        raise DamagedFile(_name(url, rel), str(error), REBUILD_OR_FETCH) from None


def _json_lines(store: Storage, url: str, rel: str) -> list[Any]:
    try:
        return [json.loads(line) for line in _text(store, url, rel).splitlines() if line.strip()]
    except ValueError as error:
        raise DamagedFile(_name(url, rel), str(error), REBUILD_OR_FETCH) from None


def _reason(url: str, row: Any) -> str:
    if not isinstance(row, dict) or not isinstance(row.get("reason"), str):
        raise DamagedFile(_name(url, REJECTS), f"a row is not a reject: {str(row)[:80]}", REBUILD_OR_FETCH)
    return row["reason"]
