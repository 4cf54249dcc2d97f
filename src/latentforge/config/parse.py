"""Turning YAML/CLI values into the typed config dataclasses; unknown keys refused with the allowed list."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

import yaml

from ..errors import ConfigError


def _coerce(value: Any, annotation: Any, where: str) -> Any:
    """Convert a YAML/CLI value to the annotated type, or raise ConfigError naming the key."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(value, inner[0], where)
    if dataclasses.is_dataclass(annotation):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return from_dict(annotation, value, where)
    if origin is list:
        if isinstance(value, (str, int, float)):
            value = [value] if not isinstance(value, str) else [v for v in value.split(",") if v]
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        return [_coerce(v, args[0], f"{where}[{i}]") for i, v in enumerate(value)]
    if annotation is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
        raise ConfigError(f"{where}: expected true or false, got {value!r}")
    if annotation is int:
        return _integer(value, where)
    if annotation is float:
        try:
            if isinstance(value, bool):
                raise TypeError
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: expected a number, got {value!r}") from None
    if annotation is str:
        return str(value)
    return value


def _integer(value: Any, where: str) -> int:
    """An int, or a float/string that is exactly one; never rounds (64.5 is an error, not 64)."""
    number: Any = value
    if isinstance(value, str):
        try:
            number = float(value) if any(c in value for c in ".eE") else int(value, 10)
        except ValueError:
            number = None
    if isinstance(number, float) and number.is_integer():
        number = int(number)
    if isinstance(number, bool) or not isinstance(number, int):
        raise ConfigError(f"{where}: expected a whole number, got {value!r}")
    return number


# Keys earlier versions knew, and why they are gone: a config that still sets one is told what to do.
RETIRED_KEYS = {
    "text.batch_size": "each distinct prompt now runs through the text encoder alone (at its own length, or padded "
                       "as Cosmos with text.padding=max_length), so its row never depends on the other prompts "
                       "(docs/text.md); delete the key",
}


def from_dict(cls: Any, data: dict[str, Any], where: str) -> Any:
    hints = typing.get_type_hints(cls)
    allowed = [f.name for f in dataclasses.fields(cls)]
    unknown = [k for k in data if k not in allowed]
    retired = [f"{where}.{k}" for k in unknown if f"{where}.{k}" in RETIRED_KEYS]
    if retired:
        raise ConfigError(f"{retired[0]} is no longer a setting: {RETIRED_KEYS[retired[0]]}")
    if unknown:
        raise ConfigError(
            f"unknown key {where + '.' if where else ''}{unknown[0]}; allowed keys"
            f"{' in ' + where if where else ''}: {', '.join(allowed)}"
        )
    kwargs = {k: _coerce(v, hints[k], f"{where}.{k}" if where else k) for k, v in data.items()}
    return cls(**kwargs)


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def parse_override(text: str) -> dict[str, Any]:
    """'frames.num_frames=93' -> {'frames': {'num_frames': 93}} (value parsed as YAML)."""
    if "=" not in text:
        raise ConfigError(f"override {text!r} must look like section.key=value")
    dotted, raw = text.split("=", 1)
    value = yaml.safe_load(raw) if raw != "" else ""
    node: dict[str, Any] = {}
    cursor = node
    parts = dotted.strip().split(".")
    for part in parts[:-1]:
        cursor = cursor.setdefault(part, {})
    cursor[parts[-1]] = value
    return node
