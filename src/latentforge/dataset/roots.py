"""Where a trainer's cache is, and its cache_config.json checked for training use.

The cache carries its own description, so a trainer needs no flags beyond the root.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..cache.bucket_index import is_bucketed
from ..cache.config_file import CacheConfig
from ..cache.layout import CACHE_CONFIG, COMPLETE_MARKER
from ..errors import CacheIntegrityError, ConfigError

ROOT_ENV = "LATENTFORGE_CACHE_ROOT"
# Trainers of the perception recipe read their cache root from this variable; accepted as an alias of ROOT_ENV.
ROOT_ENV_ALIAS = "WORLD_PERCEPTION_LATENT_CACHE_ROOT"


def resolve_cache_root(root: str | os.PathLike[str] | None) -> Path:
    """`root`, else $LATENTFORGE_CACHE_ROOT, else $WORLD_PERCEPTION_LATENT_CACHE_ROOT."""
    if root is None:
        root = os.environ.get(ROOT_ENV) or os.environ.get(ROOT_ENV_ALIAS)
    if not root:
        raise ConfigError(
            f"no cache root given; pass root=... or set {ROOT_ENV} (or its alias {ROOT_ENV_ALIAS})"
        )
    path = Path(root)
    if is_bucketed(path):
        raise ConfigError(f"{path} holds one cache per bucket: read it with BucketedLatentDataset({str(path)!r}) "
                          "and BucketBatchSampler, or one bucket with LatentCacheDataset(ROOT/buckets/<bucket>)")
    if not (path / CACHE_CONFIG).is_file():
        raise ConfigError(f"{path} is not a latentforge cache: it has no {CACHE_CONFIG}")
    if _sink_name(path) == "webdataset":
        raise ConfigError(f"{path} is a WebDataset cache (tar shards), which LatentCacheDataset cannot read: "
                          f"stream it with latentforge.streaming.StreamingLatentDataset({str(path)!r})")
    return path


def _sink_name(path: Path) -> str:
    """The sink cache_config.json records (a WebDataset cache records one; an HDF5 cache none)."""
    try:
        data = json.loads((path / CACHE_CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "hdf5"  # unreadable: the format checks that follow say what is wrong
    sink = data.get("sink") if isinstance(data, dict) else None
    return str(sink.get("name", "hdf5")) if isinstance(sink, dict) else "hdf5"


def load_for_training(root: Path, require_complete: bool = True) -> CacheConfig:
    """The cache's config; a cache without its completion marker is refused unless require_complete=False."""
    if require_complete and not (root / COMPLETE_MARKER).is_file():
        raise CacheIntegrityError(
            f"{root} has no {COMPLETE_MARKER}: the cache is still being built or its verify failed; "
            "finish the build (rerun it) or pass require_complete=False to read it anyway"
        )
    return CacheConfig.load(root)
