"""A tiny table dataset and CLI runner for the executor, resume and fault tests (PyAV writes the media)."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

from helpers import REPO
from helpers.cli_fork import run_forked
from helpers.media import pattern_frames, write_video
from latentforge.config import BuildConfig
from latentforge.config.loading import load_config

PYTHON = sys.executable


def make_table(folder: Path, count: int = 24, frames: int = 9, width: int = 48, height: int = 32,
               rows: list[dict[str, str]] | None = None) -> Path:
    """`count` distinct clips (each its own seed) plus any extra `rows`; returns the CSV path."""
    folder = Path(folder)
    (folder / "videos").mkdir(parents=True, exist_ok=True)
    table_rows = []
    for i in range(count):
        write_video(folder / "videos" / f"clip{i:03d}.mp4", pattern_frames(frames, width, height, seed=i))
        table_rows.append({"id": f"clip{i:03d}", "video": f"videos/clip{i:03d}.mp4", "caption": f"clip number {i}"})
    table_rows += rows or []
    table = folder / "samples.csv"
    with open(table, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["id", "video", "caption"])
        writer.writeheader()
        writer.writerows(table_rows)
    return table


def build_args(table: Path, root: Path, *extra: str, frames: int = 9, width: int = 48, height: int = 32) -> list[str]:
    return ["build", "--reader", "table", "--dataset", str(table), "--out", str(root), "--tokenizer", "haar-4x8x8",
            "--text", "none", "--set", "dataset.id_column=id", "--set", f"frames.num_frames={frames}",
            "--set", f"frames.height={height}", "--set", f"frames.width={width}",
            "--set", "output.rows_per_shard=4", "--set", "output.unit_size=2", "--set", "output.min_free_bytes=0",
            "--quiet", *extra]


def cli_env(**extra: str) -> dict[str, str]:
    """This environment without LATENTFORGE_FAULT*, the repository's src first on the caller's PYTHONPATH (which
    can hold packages installed beside the environment, e.g. with pip --target), then `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LATENTFORGE_FAULT")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "src"), os.environ.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def cli_command(args: list[str]) -> list[str]:
    return [PYTHON, "-m", "latentforge.cli.main", *args]


def run_cli(args: list[str], timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    """`latentforge ARGS` in a process of its own (forked from a warm interpreter: helpers.cli_fork), with
    cli_env(**env); what subprocess.run(capture_output=True, text=True) returns."""
    return run_forked(args, cli_env(**env), timeout=timeout)


def sums(root: Path) -> str:
    return (Path(root) / "SHA256SUMS").read_text()


def exec_config(table: Path, root: Path, *overrides: str) -> BuildConfig:
    """The build of build_args as a config for in-process builds (decoding on the encoder thread), then
    `section.key=value` overrides."""
    extra = {"dataset": {"reader": "table", "path": [str(table)], "id_column": "id"},
             "frames": {"num_frames": 9, "height": 32, "width": 48}, "tokenizer": {"name": "haar-4x8x8"},
             "text": {"name": "none"}, "output": {"root": str(root), "rows_per_shard": 4, "unit_size": 2,
                                                   "min_free_bytes": 0},
             "run": {"workers_per_gpu": 0}}
    return load_config(extra=extra, overrides=list(overrides))


def run_main(args: list[str], capfd, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    """`latentforge ARGS` in this process (latentforge.cli.main.main), saving the ~4 s a fresh interpreter pays
    importing torch and diffusers: the exit code (argparse's SystemExit included) and what reached file
    descriptors 1 and 2 (capfd: spawned ranks' output too), as run_cli returns them. The environment is this
    process's without LATENTFORGE_FAULT* (as cli_env) plus `env`, and is put back afterwards, as are the fault
    counters (latentforge.testing.fault_points counts arrivals per process) and the working folder (`cwd`)."""
    from latentforge.cli.main import main
    from latentforge.testing import fault_points

    saved_env, saved_arrivals, saved_cwd = dict(os.environ), dict(fault_points._arrivals), os.getcwd()
    for name in [k for k in os.environ if k.startswith("LATENTFORGE_FAULT")]:
        del os.environ[name]
    os.environ.update(env)
    fault_points._arrivals.clear()
    capfd.readouterr()
    try:
        if cwd is not None:
            os.chdir(cwd)
        try:
            code = main(list(args))
        except SystemExit as leaving:
            code = leaving.code if isinstance(leaving.code, int) else (0 if leaving.code is None else 1)
        out, err = capfd.readouterr()
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        fault_points._arrivals.clear()
        fault_points._arrivals.update(saved_arrivals)
    return subprocess.CompletedProcess(["latentforge", *args], code, out, err)
