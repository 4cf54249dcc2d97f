"""cache_dataset(root): the training Dataset of any cache, from the sink its cache_config.json records."""

from __future__ import annotations

from typing import Any

from ..cache.root import CacheRoot, RootLike
from ..sinks.dispatch import sink_for_root


def cache_dataset(root: RootLike, storage_options: dict[str, Any] | None = None, **options: Any) -> Any:
    """LatentCacheDataset for an HDF5 cache (BucketedLatentDataset for a bucketed root), StreamingLatentDataset for
    a WebDataset cache (a folder or an fsspec URL, read with `storage_options`), a plug-in sink's own Dataset;
    `options` go to that class (modalities=, expect=, text=, ...)."""
    sink, settled = sink_for_root(CacheRoot.of(root, storage_options))
    return sink.dataset(settled, **options)
