"""The command line's config flags: each flag is a shorthand for one config key (`--set section.key=value`
reaches every key)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from ..schema import BuildConfig
from .load import load_config

# flag (argparse dest) -> config key
FLAG_KEYS = {
    "dataset": "dataset.path",
    "reader": "dataset.reader",
    "out": "output.root",
    "tokenizer": "tokenizer.name",
    "tokenizer_checkpoint": "tokenizer.checkpoint",
    "tokenizer_sha256": "tokenizer.sha256",
    "precision": "tokenizer.precision",
    "text": "text.name",
    "text_path": "text.path",
    "text_source": "text.source",
    "empty_prompt": "text.empty_prompt",
    "device": "run.device",
    "limit": "dataset.limit",
    "procs": "run.procs",
    "gpus": "run.gpus",
    "workers_per_gpu": "run.workers_per_gpu",
    "max_reject_fraction": "run.max_reject_fraction",
    "on_missing_caption": "dataset.on_missing_caption",
    "executor": "run.executor",
    "ray_address": "run.ray_address",
    "metrics_port": "run.metrics_port",
}


def flags_to_mapping(flags: Mapping[str, Any]) -> dict[str, Any]:
    """{section: {key: value}} of the flags given (None means not given)."""
    mapping: dict[str, Any] = {}
    for flag, key in FLAG_KEYS.items():
        value = flags.get(flag)
        if value is not None:
            section, name = key.split(".")
            mapping.setdefault(section, {})[name] = value
    return mapping


def config_from_flags(flags: Mapping[str, Any], config_file: str | Path | None = None,
                      overrides: list[str] | tuple[str, ...] = (), preset: str | None = None) -> BuildConfig:
    """Preset < YAML file < flags < `--set` overrides."""
    return load_config(config_file, list(overrides), preset=preset, extra=flags_to_mapping(flags))
