"""Backends register by name. Modules are imported lazily, so heavy dependencies load only when used."""

from __future__ import annotations

import importlib
from typing import Any

from .errors import ConfigError

# kind -> name -> "module:attribute" (relative to the latentforge package)
_BACKENDS: dict[str, dict[str, str]] = {
    "reader": {
        "cosmos_dir": "readers.cosmos_dir:CosmosDirReader",
        "table": "readers.table:TableReader",
    },
    "tokenizer": {
        "haar-4x8x8": "tokenizers.haar:HaarTokenizer",
        "wan2.1": "tokenizers.wan21:Wan21Tokenizer",
        "wan2.2": "tokenizers.wan22:Wan22Tokenizer",
    },
    "text": {
        "t5": "text.t5:T5TextEncoder",
        "umt5": "text.umt5:UMT5TextEncoder",
    },
    "executor": {
        "local": "executor.local:LocalExecutor",
        "ray": "executor.ray.executor:RayExecutor",
    },
    "sink": {
        "hdf5": "writers.hdf5_sink:Hdf5Sink",
        "webdataset": "streaming.sink:WebDatasetSink",
    },
}


def names(kind: str) -> list[str]:
    return sorted(_BACKENDS[kind])


def resolve(kind: str, name: str) -> Any:
    """Return the class registered as `name` for `kind`, or raise ConfigError listing the allowed names."""
    table = _BACKENDS.get(kind)
    if table is None:
        raise ConfigError(f"unknown backend kind {kind!r}; allowed: {', '.join(sorted(_BACKENDS))}")
    target = table.get(name)
    if target is None:
        raise ConfigError(f"unknown {kind} {name!r}; allowed: {', '.join(sorted(table))}")
    module_name, attribute = target.split(":")
    module = importlib.import_module(f"latentforge.{module_name}")
    return getattr(module, attribute)
