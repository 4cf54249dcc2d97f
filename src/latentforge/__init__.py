"""latentforge: raw video datasets -> training-ready latent caches, and back to training loops.

The entry points, importable from here (each loads its part of the package on first use):

    build(config)             build or resume a cache           latentforge.builder.run
    scan(config)              probe the input on the CPU        latentforge.builder.scan
    load_config(...)          preset/YAML/overrides -> config   latentforge.config.loading
    verify(root, deep=...)    prove a cache intact / faithful   latentforge.verification.entry
    query_indices(root, sql)  dataset indices matching SQL      latentforge.sinks.manifest_query
    stats(root)               statistics, plots, HTML report    latentforge.report.stats_report
    preview(root)             decoded samples beside sources    latentforge.report.preview
    publish(root, dests)      upload, _SUCCESS last             latentforge.transfer
    fetch(source, root)       download and check                latentforge.transfer
    LatentCacheDataset        a cache as a training dataset     latentforge.dataset
    StreamingLatentDataset    a WebDataset cache, streamed      latentforge.dataset

docs/architecture.md maps the whole package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .version import __version__

_EXPORTS = {
    "build": "latentforge.builder.run",
    "BuildResult": "latentforge.builder.run",
    "scan": "latentforge.builder.scan",
    "load_config": "latentforge.config.loading",
    "BuildConfig": "latentforge.config",
    "verify": "latentforge.verification.entry",
    "Overrides": "latentforge.verification.reencode",
    "query_indices": "latentforge.sinks.manifest_query",
    "stats": "latentforge.report.stats_report",
    "preview": "latentforge.report.preview",
    "publish": "latentforge.transfer",
    "fetch": "latentforge.transfer",
    "Destination": "latentforge.transfer",
    "LatentCacheDataset": "latentforge.dataset",
    "StreamingLatentDataset": "latentforge.dataset",
    "CacheExpectation": "latentforge.dataset",
    "CacheConfig": "latentforge.cache.config_file",
}

__all__ = [
    "__version__", "build", "BuildResult", "scan", "load_config", "BuildConfig", "verify", "Overrides", "stats",
    "query_indices", "preview", "publish", "fetch", "Destination", "LatentCacheDataset", "StreamingLatentDataset",
    "CacheExpectation",
    "CacheConfig",
]

if TYPE_CHECKING:
    from .builder.run import BuildResult, build
    from .builder.scan import scan
    from .cache.config_file import CacheConfig
    from .config import BuildConfig
    from .config.loading import load_config
    from .dataset import CacheExpectation, LatentCacheDataset, StreamingLatentDataset
    from .report.preview import preview
    from .report.stats_report import stats
    from .sinks.manifest_query import query_indices
    from .transfer import Destination, fetch, publish
    from .verification.entry import verify
    from .verification.reencode import Overrides


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'latentforge' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
