"""Where a trainer's cache is, and its cache_config.json checked for training use.

The cache carries its own description, so a trainer needs no flags beyond the root.
"""

from __future__ import annotations

import os
from pathlib import Path

from ...cache.bucket_index import is_bucketed
from ...cache.config_file import CacheConfig
from ...cache.layout import CACHE_CONFIG, COMPLETE_MARKER, MANIFEST_TABLE
from ...cache.root import CacheRoot
from ...errors import CacheIntegrityError, ConfigError
from . import NAME
from .structure import check_cache_structure

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
    settled = CacheRoot.of(root)
    if settled.is_url:
        raise ConfigError(f"{root} is a URL; LatentCacheDataset reads a cache in a local folder: open a cache at a URL "
                          f"with latentforge.dataset.cache_dataset({str(root)!r}) (a WebDataset cache streams through "
                          f"StreamingLatentDataset), or download an HDF5 cache with `latentforge fetch {root} "
                          "LOCAL_FOLDER`")
    path = Path(root)
    if is_bucketed(path):
        raise ConfigError(f"{path} holds one cache per bucket: read it with BucketedLatentDataset({str(path)!r}) "
                          "and BucketBatchSampler, or one bucket with LatentCacheDataset(ROOT/buckets/<bucket>)")
    if not (path / CACHE_CONFIG).is_file():
        raise ConfigError(f"{path} is not a latentforge cache: it has no {CACHE_CONFIG}")
    sink = settled.recorded_sink()
    if sink != NAME:
        raise ConfigError(f"{path} is a {sink} cache, which LatentCacheDataset (HDF5 shards) cannot read: open it "
                          f"with latentforge.dataset.cache_dataset({str(path)!r}), which reads it through its sink")
    return path


def load_for_training(root: Path, require_complete: bool = True) -> CacheConfig:
    """The cache's config, its records checked against its shards (sinks/hdf5/structure.py; manifest.jsonl's lines are
    counted there, or, in a cache without manifest.parquet, parsed by read_manifest_index); a cache without its
    completion marker is refused unless require_complete=False."""
    if require_complete and not (root / COMPLETE_MARKER).is_file():
        raise CacheIntegrityError(
            f"{root} has no {COMPLETE_MARKER}: the cache is still being built or its verify failed; "
            "finish the build (rerun it) or pass require_complete=False to read it anyway"
        )
    # read_manifest_index parses every line only where there is no manifest.parquet to read the index from
    return check_cache_structure(root, manifest_lines=(root / MANIFEST_TABLE).is_file())
