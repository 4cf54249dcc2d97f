"""Backends register by name. Modules are imported lazily, so heavy dependencies load only when used.

The built-in backends are listed here. A plug-in adds one without touching this package, either from an installed
distribution's entry point in the group `latentforge.KIND` (e.g. `[project.entry-points."latentforge.sink"]
parquet = "mypkg.parquet_sink:ParquetSink"`), which every process (the CLI, spawned ranks, Ray workers) finds, or
with `register(KIND, NAME, target)` in the process that uses it.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from .errors import ConfigError

# kind -> name -> "module:attribute" (relative to the latentforge package)
_BACKENDS: dict[str, dict[str, str]] = {
    "reader": {
        "cosmos_curate": "readers.cosmos_curate:CosmosCurateReader",
        "cosmos_dir": "readers.cosmos_dir:CosmosDirReader",
        "table": "readers.table:TableReader",
    },
    "tokenizer": {
        "cosmos-cv4x8x8": "tokenizers.cosmos.continuous:CosmosCV4x8x8",
        "cosmos-cv8x8x8": "tokenizers.cosmos.continuous:CosmosCV8x8x8",
        "cosmos-cv8x16x16": "tokenizers.cosmos.continuous:CosmosCV8x16x16",
        "cosmos-dv4x8x8": "tokenizers.cosmos.discrete:CosmosDV4x8x8",
        "cosmos-dv8x8x8": "tokenizers.cosmos.discrete:CosmosDV8x8x8",
        "cosmos-dv8x16x16": "tokenizers.cosmos.discrete:CosmosDV8x16x16",
        "haar-4x8x8": "tokenizers.haar:HaarTokenizer",
        "hunyuanvideo": "tokenizers.hunyuan.hunyuanvideo:HunyuanVideoTokenizer",
        "hunyuanvideo1.5": "tokenizers.hunyuan.hunyuanvideo15:HunyuanVideo15Tokenizer",
        "ltx-video": "tokenizers.ltx.ltx_video:LTXVideoTokenizer",
        "ltx2": "tokenizers.ltx.ltx2:LTX2Tokenizer",
        "wan2.1": "tokenizers.wan.wan21:Wan21Tokenizer",
        "wan2.2": "tokenizers.wan.wan22:Wan22Tokenizer",
    },
    # audio tokenizers for audio.tokenizer (docs/audio.md): a window's PCM -> its audio latent
    "audio_tokenizer": {
        "ltx2-audio": "tokenizers.ltx.ltx2_audio:LTX2AudioTokenizer",
    },
    "text": {
        "t5": "text.t5:T5TextEncoder",
        "umt5": "text.umt5:UMT5TextEncoder",
    },
    "executor": {
        "local": "executor.local:LocalExecutor",
        "ray": "executor.ray.executor:RayExecutor",
    },
    # image encoders for conditioning.image_embeds (docs/conditioning.md): frame 0 of each clip -> [tokens, width]
    "image_encoder": {
        "clip-vit-h14": "conditioning.clip_vision:ClipVisionH14",
    },
    # captioners for captions.mode=generate_* (docs/captions.md): a window's sampled frames -> a caption
    "captioner": {
        "qwen2.5-vl": "captions.qwen_vl:QwenVLCaptioner",
    },
    "sink": {
        "hdf5": "sinks.hdf5.sink:Hdf5Sink",
        "webdataset": "sinks.webdataset.sink:WebDatasetSink",
    },
}


# kind -> name -> a class, or "package.module:attribute" (absolute): plug-ins, from register() and entry points
_PLUGINS: dict[str, dict[str, Any]] = {kind: {} for kind in _BACKENDS}
_ENTRY_POINTS_READ: set[str] = set()


def register(kind: str, name: str, target: Any) -> None:
    """Add the backend `target` (a class, or "package.module:attribute") as `name` of `kind` in this process."""
    if kind not in _BACKENDS:
        raise ConfigError(f"unknown backend kind {kind!r}; allowed: {', '.join(sorted(_BACKENDS))}")
    if name in _table(kind):
        raise ConfigError(f"{kind} {name!r} is registered already; give the plug-in another name")
    _PLUGINS[kind][name] = target


def _table(kind: str) -> dict[str, Any]:
    """Every backend of `kind`: built-ins ("module:attribute" relative to latentforge), then plug-ins."""
    if kind not in _ENTRY_POINTS_READ:
        _ENTRY_POINTS_READ.add(kind)
        for point in entry_points(group=f"latentforge.{kind}"):
            if point.name not in _BACKENDS[kind]:
                _PLUGINS[kind].setdefault(point.name, point.value)
    return {**{name: f"latentforge.{target}" for name, target in _BACKENDS[kind].items()}, **_PLUGINS[kind]}


def names(kind: str) -> list[str]:
    return sorted(_table(kind))


def resolve(kind: str, name: str) -> Any:
    """Return the class registered as `name` for `kind`, or raise ConfigError listing the allowed names."""
    if kind not in _BACKENDS:
        raise ConfigError(f"unknown backend kind {kind!r}; allowed: {', '.join(sorted(_BACKENDS))}")
    table = _table(kind)
    target = table.get(name)
    if target is None:
        raise ConfigError(f"unknown {kind} {name!r}; allowed: {', '.join(sorted(table))}")
    if not isinstance(target, str):
        return target
    module_name, attribute = target.split(":")
    return getattr(importlib.import_module(module_name), attribute)
