"""Quirky clips for bucketed builds: a landscape, a portrait, a square, a near-square, a short and a tiny clip,
written with PyAV (helpers.media), and the build config that buckets them (haar-4x8x8, rgb, tiny T5)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.builds import tiny_t5, write_table
from helpers.media import pattern_frames, write_video
from latentforge.config import BuildConfig
from latentforge.config.loading import load_config

# bucket name -> [num_frames, height, width]
BUCKETS = {"17x32x64": [17, 32, 64], "17x64x32": [17, 64, 32], "17x48x48": [17, 48, 48], "9x32x64": [9, 32, 64]}
# id -> (width, height, frames, rotation, the bucket the rule must choose, or None for no_bucket)
CLIPS = {
    "landscape": (96, 48, 17, 0, "17x32x64"),
    "landscape_long": (128, 64, 21, 0, "17x32x64"),
    "near_square": (80, 64, 17, 0, "17x48x48"),
    "portrait": (48, 96, 17, 0, "17x64x32"),
    "portrait_rotated": (96, 48, 17, 90, "17x64x32"),  # coded landscape, displayed portrait
    "short": (96, 48, 11, 0, "9x32x64"),
    "square": (64, 64, 18, 0, "17x48x48"),
    "square_big": (72, 72, 17, 0, "17x48x48"),
    "tiny": (24, 16, 17, 0, None),
}


def bucket_world(folder: Path) -> tuple[Path, Path]:
    """The clips, their CSV table and a tiny T5 that knows the captions: (table, t5 folder)."""
    folder.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for seed, (clip, (width, height, frames, rotation, _)) in enumerate(CLIPS.items()):
        write_video(folder / f"{clip}.mp4", pattern_frames(frames, width, height, seed=seed), fps=16,
                    rotation=rotation)
        rows.append({"id": clip, "video": f"{clip}.mp4", "caption": f"a {clip.replace('_', ' ')} pattern"})
    table = write_table(rows, folder / "clips.csv")
    return table, tiny_t5(folder / "t5", rows, d_model=32)


def bucket_settings(table: Path, t5: Path, root: Path) -> dict[str, Any]:
    """The config mapping of the bucketed build (what a YAML file for `latentforge build --config` holds)."""
    return {
        "dataset": {"reader": "table", "path": [str(table)], "id_column": "id"},
        "frames": {"buckets": list(BUCKETS.values()), "fps": "source", "resize": "cover_crop"},
        "modalities": {"names": ["rgb"]},
        "tokenizer": {"name": "haar-4x8x8", "precision": "fp32"},
        "text": {"name": "t5", "path": str(t5), "precision": "fp32", "max_length": 16},
        "output": {"root": str(root), "rows_per_shard": 2, "unit_size": 2, "batch_size": 2, "min_free_bytes": 0},
        "run": {"workers_per_gpu": 0, "max_reject_fraction": 0.5},
    }


def bucket_config(table: Path, t5: Path, root: Path, overrides: tuple[str, ...] = ()) -> BuildConfig:
    return load_config(extra=bucket_settings(table, t5, root), overrides=list(overrides))
