"""load_config: preset < YAML file < mapping < `section.key=value` overrides, parsed (each backend's own keys into
its options, backend_options.py), then checked: first what needs no backend (config/checks.py), then each named
backend's own part (backend_checks.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ...errors import ConfigError
from ..checks import validate
from ..parse import deep_merge, from_dict, parse_override
from ..presets import preset_dict
from ..schema import BuildConfig
from .backend_checks import check_backends
from .backend_options import forget_replaced_backends, split_backend_keys, with_backend_options
from .reader_choice import name_reader


def _read_yaml(path: str | Path) -> dict[str, Any]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"--config {path}: cannot read it ({error.strerror or error}); give an existing YAML "
                          "file") from None
    try:
        loaded = yaml.safe_load(text) or {}
    except yaml.YAMLError as error:
        raise ConfigError(f"--config {path} is not valid YAML: {error}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: the config file must hold a mapping")
    return loaded


def load_config(
    path: str | Path | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    preset: str | None = None,
    extra: dict[str, Any] | None = None,
) -> BuildConfig:
    """Preset (if any) < YAML file < `extra` mapping < `section.key=value` overrides; then validate."""
    file_data = _read_yaml(path) if path is not None else {}
    flags: dict[str, Any] = {}
    for override in overrides:  # one layer: the order of --set flags among themselves does not matter
        flags = deep_merge(flags, parse_override(override))
    layers = [file_data, extra or {}, flags]
    chosen = preset
    for layer in layers:
        chosen = layer.get("preset", chosen)
    data: dict[str, Any] = preset_dict(chosen) if chosen else {}
    for layer in layers:
        data = deep_merge(forget_replaced_backends(data, layer), layer)
    data, options = split_backend_keys(name_reader(data))
    config = with_backend_options(from_dict(BuildConfig, data, ""), options)
    validate(config)
    check_backends(config)
    return config
