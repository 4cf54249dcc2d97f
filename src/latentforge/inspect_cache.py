"""`latentforge inspect ROOT`: what a cache holds, read from its records and HDF5 metadata (no sample data)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import h5py

from .errors import CacheIntegrityError
from .io import read_jsonl
from .writers.shards import EMPTY_PROMPT_NAME, SHARDS_DIR, is_shard_name


def _datasets(path: Path) -> dict[str, dict[str, Any]]:
    with h5py.File(path, "r") as handle:
        return {
            name: {"dtype": str(ds.dtype), "shape": list(ds.shape), "chunks": list(ds.chunks or ()),
                   "compression": ds.compression}
            for name, ds in handle.items()
        }


def _count_lines(path: Path) -> int:
    with open(path, "rb") as handle:
        return sum(1 for _ in handle)


def inspect_cache(root: Path) -> dict[str, Any]:
    """Counts, markers, shards with their rows and sizes, datasets of the first shard, reject reasons, config."""
    root = Path(root)
    config_path = root / "cache_config.json"
    if not config_path.is_file():
        raise CacheIntegrityError(f"{root} has no cache_config.json; is it a latentforge cache root?")
    config = json.loads(config_path.read_text(encoding="utf-8"))
    shard_dir = root / SHARDS_DIR
    shard_files = sorted(p for p in shard_dir.iterdir() if is_shard_name(p.name)) if shard_dir.is_dir() else []
    shards = []
    for path in shard_files:
        start, end = (int(v) for v in path.stem.split("-")[4:6])
        shards.append({"path": f"{SHARDS_DIR}/{path.name}", "start": start, "end": end, "rows": end - start,
                       "bytes": path.stat().st_size})
    manifest = root / "manifest.jsonl"
    rejects = root / "rejects.jsonl"
    return {
        "root": str(root),
        "complete": (root / "_CACHE_COMPLETE").is_file(),
        "published": (root / "_SUCCESS").is_file(),
        "num_samples": config.get("num_samples"),
        "num_shards": config.get("num_shards"),
        "manifest_rows": _count_lines(manifest) if manifest.is_file() else 0,
        "rejects": dict(sorted(Counter(r["reason"] for r in read_jsonl(rejects)).items())) if rejects.is_file() else {},
        "bytes": sum(s["bytes"] for s in shards),
        "shards": shards,
        "datasets": _datasets(shard_files[0]) if shard_files else {},
        "empty_prompt": _datasets(root / EMPTY_PROMPT_NAME) if (root / EMPTY_PROMPT_NAME).is_file() else None,
        "config": config,
    }
