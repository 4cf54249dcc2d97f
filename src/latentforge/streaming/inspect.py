"""`latentforge inspect` of a WebDataset cache, local or at an fsspec URL: the summary an HDF5 cache gets,
read from cache_config.json, the manifest, rejects.jsonl, the markers and the object listing (no tar is read)."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from ..cache.config_file import CacheConfig
from ..cache.inspect import CacheSummary, ShardFile
from ..cache.layout import CACHE_CONFIG, COMPLETE_MARKER, MANIFEST, PUBLISHED_MARKER, REJECTS
from ..errors import CacheIntegrityError
from .layout import EMPTY_PROMPT_TAR
from .store import CacheStore

_TAR_NAME = re.compile(r"^shards/part-\d{5}-of-\d{5}-(\d{9})-(\d{9})\.tar$")


def inspect_webdataset(url: str, storage_options: dict[str, Any] | None = None) -> CacheSummary:
    store = CacheStore(url, dict(storage_options or {}))
    present = store.list_files()
    if CACHE_CONFIG not in present:
        raise CacheIntegrityError(f"{url} has no {CACHE_CONFIG}; give the root of a WebDataset cache")
    config = CacheConfig.from_json(json.loads(store.read(CACHE_CONFIG)))
    shards = []
    for rel in sorted(present):
        match = _TAR_NAME.match(rel)
        if match:
            shards.append(ShardFile(rel, int(match.group(1)), int(match.group(2)), present[rel]))
    rejects = Counter(json.loads(line)["reason"] for line in store.read(REJECTS).splitlines() if line.strip()) \
        if REJECTS in present else Counter()
    sink = json.loads(store.read(CACHE_CONFIG)).get("sink") or {}
    return CacheSummary(
        root=url,
        config=config,
        complete=COMPLETE_MARKER in present,
        published=PUBLISHED_MARKER in present,
        manifest_rows=len(store.read(MANIFEST).splitlines()) if MANIFEST in present else 0,
        rejects=dict(sorted(rejects.items())),
        shards=shards,
        datasets={"sink": dict(sink)},
        empty_prompt={EMPTY_PROMPT_TAR: {"bytes": present[EMPTY_PROMPT_TAR]}} if EMPTY_PROMPT_TAR in present else None,
    )
