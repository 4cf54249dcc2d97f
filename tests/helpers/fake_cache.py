"""Caches of the documented layout for the dataset tests, and an h5py-only reader to compare against.

`write_fake_cache` writes through latentforge.dataset.demo_cache (h5py, the layout of docs/cache-format.md);
`h5py_row` reads a row the way the format doc describes it, with json + h5py and none of our reader code.
Set LATENTFORGE_TEST_CACHE_ROOT to also run the layout-generic tests against a cache built for real.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from latentforge.dataset.synthetic_cache import SyntheticCacheSpec, write_synthetic_cache

REAL_CACHE_ENV = "LATENTFORGE_TEST_CACHE_ROOT"


def write_fake_cache(root: Path, **spec: Any) -> Path:
    return write_synthetic_cache(root, dataclasses.replace(SyntheticCacheSpec(), **spec))


def real_cache_root() -> Path | None:
    value = os.environ.get(REAL_CACHE_ENV)
    return Path(value) if value else None


def edit_cache_config(root: Path, dotted: str, value: Any) -> None:
    """Set one (dotted) key of ROOT/cache_config.json."""
    path = root / "cache_config.json"
    config = json.loads(path.read_text())
    node = config
    parts = dotted.split(".")
    for part in parts[:-1]:
        node = node[part]
    node[parts[-1]] = value
    path.write_text(json.dumps(config, indent=2))


def read_json_config(root: Path) -> dict[str, Any]:
    return json.loads((root / "cache_config.json").read_text())


def manifest_rows(root: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (root / "manifest.jsonl").read_text(encoding="utf-8").splitlines()]


def h5py_row(root: Path, row: dict[str, Any]) -> dict[str, np.ndarray]:
    """Every dataset of the shard row a manifest row points at, read with h5py."""
    with h5py.File(root / row["shard_path"], "r") as handle:
        return {name: handle[name][row["cache_row"]] for name in handle}


def h5py_empty_prompt(root: Path) -> dict[str, np.ndarray]:
    with h5py.File(root / "empty_prompt.h5", "r") as handle:
        return {name: handle[name][0] for name in handle}
