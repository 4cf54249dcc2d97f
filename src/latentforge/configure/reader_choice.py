"""dataset.reader=auto: the reader that claims dataset.path (a folder, or table files), decided before checks."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from .. import registry
from ..config.schema import BuildConfig
from ..errors import ConfigError

AUTO = "auto"


def choose_reader(paths: list[str]) -> str:
    """The one registered reader whose `claims(paths)` holds, or a ConfigError saying what each one reads."""
    if not paths:
        raise ConfigError("dataset.path is empty; give the dataset folder or table file(s) with --dataset")
    claimed = [name for name in registry.names("reader") if registry.resolve("reader", name).claims(paths)]
    if len(claimed) == 1:
        return claimed[0]
    if len(paths) == 1 and not Path(paths[0]).exists():
        raise ConfigError(f"dataset.path {paths[0]!r} does not exist; give the dataset folder or table file(s)")
    raise ConfigError(f"cannot tell the reader from dataset.path={paths!r}: a folder is read by cosmos_dir, "
                      ".csv/.jsonl/.ndjson/.parquet tables (or globs of them) by table; choose one with --reader")


def with_reader(config: BuildConfig) -> BuildConfig:
    """`config` with dataset.reader=auto replaced by the chosen reader's name (what the cache records)."""
    if config.dataset.reader != AUTO:
        return config
    dataset = dataclasses.replace(config.dataset, reader=choose_reader(config.dataset.path))
    return dataclasses.replace(config, dataset=dataset)
