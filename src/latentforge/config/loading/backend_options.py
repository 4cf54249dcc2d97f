"""Each backend's own config keys. A section that names a backend (dataset.reader, tokenizer.name, output.sink,
run.executor) has
its common keys, declared in config/schema.py, and the keys of the backend it names, declared by that backend's
class as a dataclass (`options_class`) and parsed into it here, as strictly as every other key: `--set
tokenizer.conv_kernels=heuristics` still reaches the Wan tokenizers, `--set dataset.id_column=id` the table reader,
and a key no backend of the kind has is refused with the allowed list. dataset.reader=auto is settled first
(reader_choice.py), so the reader whose keys these are is known.

A key another backend of the kind owns is dropped when it holds that backend's default (run records of earlier
versions list every backend's keys at their defaults), and refused naming its backend otherwise. When a later
layer (YAML over a preset, `--set` over YAML) names another backend, the keys the earlier layers gave the
replaced one are forgotten: a preset's Wan settings do not follow `--set tokenizer.name=haar-4x8x8`."""

from __future__ import annotations

import dataclasses
from typing import Any

from ... import registry
from ...errors import ConfigError
from ..parse import from_dict
from ..schema import BACKEND_OPTIONS, BuildConfig, DatasetConfig, OutputConfig, RunConfig, TokenizerConfig
from .reader_choice import AUTO

# section -> (the key naming its backend, the registry kind, the section's dataclass)
_SECTIONS = {"dataset": ("reader", "reader", DatasetConfig), "tokenizer": ("name", "tokenizer", TokenizerConfig),
             "output": ("sink", "sink", OutputConfig), "run": ("executor", "executor", RunConfig)}


def _common_keys(section_class: type) -> list[str]:
    return [f.name for f in dataclasses.fields(section_class) if f.name != BACKEND_OPTIONS]


def _named(section: str, data: dict[str, Any]) -> str:
    selector, _, section_class = _SECTIONS[section]
    default = next(f.default for f in dataclasses.fields(section_class) if f.name == selector)
    return str((data.get(section) or {}).get(selector, default))


def forget_replaced_backends(merged: dict[str, Any], layer: dict[str, Any]) -> dict[str, Any]:
    """`merged` without the backend keys of a section whose backend `layer` replaces."""
    out = dict(merged)
    for section, (selector, _, section_class) in _SECTIONS.items():
        named = (layer.get(section) or {}) if isinstance(layer.get(section), dict) else {}
        if selector not in named or AUTO in (str(named[selector]), _named(section, out)):
            continue  # dataset.reader=auto names no reader yet: the keys set so far may well be the one chosen
        if isinstance(out.get(section), dict) and str(named[selector]) != _named(section, out):
            common = _common_keys(section_class)
            out[section] = {k: v for k, v in out[section].items() if k in common}
    return out


def _defaults(options_class: type) -> dict[str, Any]:
    return {f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
            for f in dataclasses.fields(options_class)}


def _owners(kind: str, key: str, value: Any, named: str) -> tuple[list[str], bool]:
    """The other backends of `kind` that have `key`, and whether `value` is the default of every one of them."""
    owners, at_default = [], True
    for name in registry.names(kind):
        if name == named:
            continue
        defaults = _defaults(registry.resolve(kind, name).options_class)
        if key in defaults:
            owners.append(name)
            at_default = at_default and defaults[key] == value
    return owners, at_default


def split_backend_keys(data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`data` with each section's backend keys taken out, and {section: that backend's options, parsed}."""
    data = dict(data)
    options: dict[str, Any] = {}
    for section, (selector, kind, section_class) in _SECTIONS.items():
        raw = dict(data.get(section) or {}) if isinstance(data.get(section), dict) else data.get(section)
        if not isinstance(raw, dict):
            continue  # from_dict says what is wrong with a section that is not a mapping
        named = _named(section, data)
        if named == AUTO:  # dataset.reader=auto with no dataset.path: no reader's keys can be judged yet
            data[section] = {k: v for k, v in raw.items() if k in _common_keys(section_class)}
            continue
        if named not in registry.names(kind):
            raise ConfigError(f"{section}.{selector}={named!r}; allowed: {', '.join(registry.names(kind))}")
        options_class = registry.resolve(kind, named).options_class
        own_keys = [f.name for f in dataclasses.fields(options_class)]
        common = _common_keys(section_class)
        own = {k: raw.pop(k) for k in list(raw) if k in own_keys}
        for key in [k for k in raw if k not in common]:
            owners, at_default = _owners(kind, key, raw[key], named)
            if owners and at_default:
                del raw[key]
            elif owners:
                raise ConfigError(f"{section}.{key} is a setting of {kind} {', '.join(owners)}, not of "
                                  f"{section}.{selector}={named!r}; drop it, or set {section}.{selector} to "
                                  f"{' or '.join(owners)}")
            else:
                raise ConfigError(f"unknown key {section}.{key}; allowed keys in {section} (with {section}.{selector}="
                                  f"{named!r}): {', '.join(common + own_keys)}")
        data[section] = raw
        options[section] = from_dict(options_class, own, section)
    return data, options


def with_backend_options(config: BuildConfig, options: dict[str, Any]) -> BuildConfig:
    sections = {name: dataclasses.replace(getattr(config, name), **{BACKEND_OPTIONS: value})
                for name, value in options.items()}
    return dataclasses.replace(config, **sections)
