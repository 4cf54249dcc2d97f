"""dataset.reader=auto: the reader that claims dataset.path (a folder, or table files), decided before checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ... import registry
from ...errors import ConfigError
from ..parse import from_dict
from ..schema import DatasetConfig

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
    if len(paths) == 1 and Path(paths[0]).is_file():
        raise ConfigError(f"dataset.path {paths[0]!r} is a single file, which no reader takes: list videos (one is "
                          "enough) in a .csv/.jsonl/.parquet table with `video` and `caption` columns, or put them "
                          "in a Cosmos folder (<root>/videos/*.mp4 with captions in <root>/metas/<stem>.txt) "
                          "(docs/inputs.md)")
    raise ConfigError(f"cannot tell the reader from dataset.path={paths!r}: a folder is read by cosmos_dir (by "
                      "cosmos_curate when it holds clips/ and metas/<version>/), "
                      ".csv/.jsonl/.ndjson/.parquet tables (or globs of them) by table; choose one with --reader")


def name_reader(data: dict[str, Any]) -> dict[str, Any]:
    """The config mapping with dataset.reader=auto (or unset) replaced by the chosen reader's name, which the cache
    records and whose own keys the dataset section may then hold."""
    section = data.get("dataset")
    if section is None:
        section = {}
    if not isinstance(section, dict) or str(section.get("reader", AUTO)) != AUTO:
        return data  # from_dict says what is wrong with a section that is not a mapping
    paths = from_dict(DatasetConfig, {"path": section["path"]} if "path" in section else {}, "dataset").path
    if not paths:
        return data  # no reader to choose: the config checks say dataset.path is empty, after the key checks
    return {**data, "dataset": {**section, "reader": choose_reader(paths)}}
