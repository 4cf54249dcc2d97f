"""Helpers for the whole-build acceptance tests: a tiny world, its table in any format, a tiny build config,
the CLI in a subprocess, and the bytes of every checksummed file of a cache.

The media come from latentforge.demo.world (PyAV/Pillow/numpy writers); tables are written with the
standard library and pyarrow, never with latentforge.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pa_parquet

from helpers import SRC
from helpers.cli_fork import run_forked
from latentforge.builder.run import BuildResult, build
from latentforge.config import BuildConfig
from latentforge.config.loading import load_config
from latentforge.demo.tiny_text_model import make_tiny_t5
from latentforge.demo.world import make_world

# Tiny geometry: world clips are 64x48 (4:3); the cache is 32x48 (cover_crop crops rows), 9 frames -> 3 latent frames.
WORLD_SIZE = (64, 48)
FRAMES = {"num_frames": 9, "height": 32, "width": 48}
PERCEPTION = ("rgb", "mask", "depth")


def tiny_world(folder: Path, clips: int = 4) -> list[dict[str, Any]]:
    """Clips of the demo world at 64x48; returns the rows of its CSV (the last clip has only 6 frames)."""
    table = make_world(folder, clips=clips, width=WORLD_SIZE[0], height=WORLD_SIZE[1])
    rows = read_csv(table)
    table.unlink()  # each test writes the table it needs
    for row in rows:
        row["objects"] = int(row["objects"])
    return rows


def tiny_t5(folder: Path, rows: list[dict[str, Any]], d_model: int = 1024) -> Path:
    """A tiny T5EncoderModel folder (real architecture, random weights) whose tokenizer knows the captions."""
    captions = [row["caption"] for row in rows if row.get("caption")]
    return make_tiny_t5(folder, d_model=d_model, corpus=captions * 4)


def read_csv(path: Path) -> list[dict[str, Any]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def table_subset(table: Path, name: str, ids) -> Path:
    """The rows of the CSV `table` whose id is in `ids`, in its order, as the CSV `name` beside it."""
    return write_table([row for row in read_csv(table) if row["id"] in ids], Path(table).with_name(name))


def write_table(rows: list[dict[str, Any]], path: Path) -> Path:
    """CSV (csv module), JSONL (json module) or Parquet (pyarrow), by suffix; None is an absent value."""
    path = Path(path)
    columns = list(rows[0])
    if path.suffix == ".csv":
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns)
            writer.writeheader()
            writer.writerows({k: ("" if v is None else v) for k, v in row.items()} for row in rows)
    elif path.suffix == ".jsonl":
        text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        path.write_text(text, encoding="utf-8")
    elif path.suffix == ".parquet":
        pa_parquet.write_table(pa.Table.from_pylist(rows), path)
    else:
        raise ValueError(f"no table writer for {path.suffix}")
    return path


def tiny_extra(
    table: Path | list[Path],
    root: Path,
    text_path: Path | None = None,
    modalities: tuple[str, ...] = PERCEPTION,
) -> dict[str, Any]:
    """The `extra` mapping of a tiny perception-layout build with haar-4x8x8 (text none unless a T5 folder)."""
    tables = table if isinstance(table, list) else [table]
    dataset: dict[str, Any] = {"reader": "table", "path": [str(t) for t in tables], "id_column": "id",
                               "passthrough_columns": ["objects"]}
    if "mask" in modalities:
        dataset["mask_column"] = "mask"
    if "depth" in modalities:
        dataset["depth_column"] = "depth"
    text = {"name": "none"} if text_path is None else {"name": "t5", "path": str(text_path), "precision": "fp32"}
    return {
        "dataset": dataset,
        "frames": dict(FRAMES),
        "modalities": {"names": list(modalities), "mask": {"ids": [0, 1, 2, 3]}},
        "tokenizer": {"name": "haar-4x8x8", "precision": "fp32"},
        "text": text,
        "output": {"root": str(root), "rows_per_shard": 2, "unit_size": 2, "batch_size": 2, "min_free_bytes": 0},
        # Decode on the encoder thread: spawning decode workers costs seconds per build at this size.
        "run": {"workers_per_gpu": 0},
    }


def tiny_config(table: Path | list[Path], root: Path, text_path: Path | None = None,
                modalities: tuple[str, ...] = PERCEPTION, overrides: tuple[str, ...] = ()) -> BuildConfig:
    """tiny_extra on top of the perception preset, then `section.key=value` overrides."""
    extra = tiny_extra(table, root, text_path, modalities)
    return load_config(preset="openvid-perception-stage1", extra=extra, overrides=list(overrides))


def build_quietly(config: BuildConfig) -> BuildResult:
    return build(config, overwrite=True, quiet=True)


def build_stopped_in_commit(config: BuildConfig) -> None:
    """The build stopped by a fault after its commit wrote the first shard: every unit staged, nothing committed
    (a finished build retires its staged units)."""
    import pytest

    from latentforge.testing import fault_points

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(fault_points.FAULT_ENV, "commit:1:raise")
        patch.setattr(fault_points, "_arrivals", {})
        with pytest.raises(fault_points.InjectedFault):
            build(config, quiet=True)


def checksummed_bytes(root: Path) -> dict[str, bytes]:
    """Every file SHA256SUMS lists (parsed as `sha256sum` lines), by relative path, with its bytes."""
    names = [line.split("  ", 1)[1] for line in (root / "SHA256SUMS").read_text(encoding="utf-8").splitlines()]
    return {name: (root / name).read_bytes() for name in names}


def read_manifest(root: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (root / "manifest.jsonl").read_text(encoding="utf-8").splitlines()]


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`latentforge ARGS` in a process of its own, as a user runs it (forked from a warm interpreter:
    helpers.cli_fork)."""
    # PYTHONPATH joined as helpers.exec_world.cli_env joins it (no empty entry when it was unset, which would put
    # the working folder on the path): the same environment shares one warm interpreter
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH")) if p)}
    return run_forked(list(args), env, cwd=cwd, timeout=300)
