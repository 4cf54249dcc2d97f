"""Where a cache is, settled once: a local folder or an fsspec URL, and the sink its cache_config.json records.

Every verb turns what it was given into a CacheRoot first and asks it, never the string, whether it is local.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from ..errors import ConfigError, NotACache
from ..locations import is_url
from ..storage import Storage
from .layout import BUCKET_INDEX, BUCKETS_DIR, CACHE_CONFIG, RUN_RECORDS_DIR

DEFAULT_SINK = "hdf5"  # what a cache_config.json without a "sink" section was written by


@dataclass(frozen=True)
class CacheRoot:
    location: str  # a local path or an fsspec URL, as given
    storage_options: dict[str, Any] = field(default_factory=dict, compare=False)  # fsspec's, for a URL

    @classmethod
    def of(cls, root: RootLike, storage_options: dict[str, Any] | None = None) -> CacheRoot:
        if isinstance(root, CacheRoot):
            return root
        return cls(root if isinstance(root, str) else os.fspath(root), dict(storage_options or {}))

    @property
    def is_url(self) -> bool:
        return is_url(self.location)

    def __str__(self) -> str:
        return self.location

    def local_folder(self, verb: str) -> Path:
        """The folder, or ConfigError when the root is a URL: `verb` reads a cache in a local folder."""
        if self.is_url:
            raise ConfigError(f"{self} is a URL, but {verb} reads a cache in a local folder; download it first with "
                              f"`latentforge fetch {self} LOCAL_FOLDER` and give LOCAL_FOLDER")
        return Path(self.location)

    def require_cache(self) -> None:
        """NotACache, one line naming the root and what it is not, unless the root holds a cache_config.json (or a
        bucketed root's buckets.json). Whether that file parses, and the rest of the cache, is for the checks that
        follow; a cache that never finished its commit still has its cache_config.json and gets them all."""
        if self.is_url:
            storage = self.storage()
            if not any(storage.exists(name) for name in (CACHE_CONFIG, BUCKET_INDEX)):
                raise NotACache(f"{self} is not a latentforge cache: it has no {CACHE_CONFIG}; give the URL of a "
                                "cache's root (the prefix holding cache_config.json)")
            return
        folder = Path(self.location)
        if any((folder / name).is_file() for name in (CACHE_CONFIG, BUCKET_INDEX)):
            return
        if not folder.exists():
            raise NotACache(f"{self} does not exist; give the root of a latentforge cache (the folder holding "
                            f"{CACHE_CONFIG}, the --out of its build)")
        if not folder.is_dir():
            raise NotACache(f"{self} is a file, not a latentforge cache; give the folder holding {CACHE_CONFIG}")
        started = [f"{name}/" for name in (RUN_RECORDS_DIR, BUCKETS_DIR) if (folder / name).is_dir()]
        if started:  # a build stopped before its commit wrote cache_config.json (a bucketed one: buckets.json)
            raise NotACache(f"{self} is not a latentforge cache yet: it holds an unfinished build "
                            f"({' and '.join(started)}) but no {CACHE_CONFIG}; rerun the build command to finish it")
        raise NotACache(f"{self} is not a latentforge cache: it has no {CACHE_CONFIG}; give the folder holding it "
                        "(the --out of its build)")

    def storage(self) -> Storage:
        """The root's files through fsspec (a URL root's; a local folder's too)."""
        return Storage(self.location, self.storage_options)

    def remote_files(self) -> list[str]:
        """Every object under a URL root, as paths relative to it (none when nothing is there yet)."""
        return sorted(self.storage().list_files())

    def read_config(self) -> dict[str, Any] | None:
        """cache_config.json as JSON; None when there is none or it is not a JSON object (the format checks that
        follow say what is wrong)."""
        try:
            if self.is_url:
                data = json.loads(self.storage().read(CACHE_CONFIG))
            else:
                data = json.loads((Path(self.location) / CACHE_CONFIG).read_text(encoding="utf-8"))
        except (OSError, ValueError):  # FileNotFoundError, a URL fsspec cannot reach, broken JSON
            return None
        return data if isinstance(data, dict) else None

    def recorded_sink(self) -> str:
        """The sink the cache here records, DEFAULT_SINK when it records none or nothing can be read (that sink's
        verify then says what is missing)."""
        config = self.read_config()
        return DEFAULT_SINK if config is None else sink_in(config)


RootLike = Union[str, "os.PathLike[str]", CacheRoot]


def sink_in(config: dict[str, Any]) -> str:
    """The sink a cache_config.json (as JSON) records: its "sink" section's name, else DEFAULT_SINK."""
    sink = config.get("sink")
    return str(sink.get("name", DEFAULT_SINK)) if isinstance(sink, dict) else DEFAULT_SINK
