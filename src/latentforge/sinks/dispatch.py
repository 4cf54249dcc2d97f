"""Which sink reads a cache: the one its cache_config.json records, looked up by name in the registry."""

from __future__ import annotations

from pathlib import Path

from .. import registry
from ..cache.root import CacheRoot, RootLike
from .base import Sink


def sink_for_root(root: RootLike) -> tuple[type[Sink], CacheRoot]:
    """The sink class of the cache at `root`, and the root settled as a CacheRoot; NotACache when nothing there is a
    cache (a missing path, a file, a folder without cache_config.json)."""
    settled = CacheRoot.of(root)
    settled.require_cache()
    return registry.resolve("sink", settled.recorded_sink()), settled


def local_hdf5_cache(root: RootLike, verb: str) -> Path:
    """The local HDF5 cache folder `verb` reads at `root`, or ConfigError from its sink saying what to do instead."""
    sink, settled = sink_for_root(root)
    return sink.local_hdf5(settled, verb)
