"""What kind of cache a root holds, read from its cache_config.json: an HDF5 cache in a local folder (the
default sink), or a WebDataset cache of tar shards in a local folder or at an fsspec URL (s3://, file://, ...).

Verbs that read HDF5 shards ask here first, so a WebDataset root or a URL is refused by name with what to do
instead, rather than failing inside h5py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .layout import CACHE_CONFIG

HDF5, WEBDATASET = "hdf5", "webdataset"
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")  # what fsspec takes as a URL


def is_url(root: str | Path) -> bool:
    return isinstance(root, str) and bool(_URL.match(root))


def read_root_config(root: str | Path, storage_options: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """cache_config.json of the cache at `root` (a folder or a URL) as JSON; None when there is none or it is not
    a JSON object (the format checks that follow say what is wrong)."""
    try:
        if is_url(root):
            import fsspec

            try:
                fs, path = fsspec.core.url_to_fs(str(root), **(storage_options or {}))
            except ImportError as error:
                raise ConfigError(f"{root}: no usable fsspec backend ({error}); install the package fsspec "
                                  "names") from None
            data = json.loads(fs.cat_file(f"{path.rstrip('/')}/{CACHE_CONFIG}"))
        else:
            data = json.loads((Path(root) / CACHE_CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # FileNotFoundError, a URL fsspec cannot reach, broken JSON
        return None
    return data if isinstance(data, dict) else None


def sink_of(config: dict[str, Any]) -> str:
    """The sink a cache_config.json records: a WebDataset cache records one, an HDF5 cache none."""
    sink = config.get("sink")
    return str(sink.get("name", HDF5)) if isinstance(sink, dict) else HDF5


def root_sink(root: str | Path) -> str | None:
    """The sink of the cache at `root`, or None when no cache_config.json can be read there."""
    config = read_root_config(root)
    return None if config is None else sink_of(config)


def require_local_hdf5(root: str | Path, verb: str, instead: str) -> None:
    """Refuse a WebDataset cache or a URL where `verb` reads HDF5 shards in a local folder. `instead` says what
    to do with a WebDataset cache."""
    if root_sink(root) == WEBDATASET:
        raise ConfigError(f"{root} is a WebDataset cache (tar shards), but {verb} reads HDF5 caches only; "
                          f"{instead}")
    refuse_url(root, verb)


def refuse_url(root: str | Path, verb: str) -> None:
    """Refuse a URL where `verb` reads a cache in a local folder."""
    if is_url(root):
        raise ConfigError(f"{root} is a URL, but {verb} reads a cache in a local folder; download it first with "
                          f"`latentforge fetch {root} LOCAL_FOLDER` and give LOCAL_FOLDER")
