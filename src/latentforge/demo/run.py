"""`latentforge demo`: generate a world and a tiny T5, build the perception layout with haar-4x8x8, deep-verify,
report. With `tokenizer="cosmos-dv8x16x16"` the same world goes through a tiny random Cosmos DV tokenizer into a
discrete-token cache, whose token statistics the report then holds.

Runs end to end on a laptop CPU in well under a minute; every step uses the same code as a real build.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..builder.run import build
from ..cache.config_file import CacheConfig
from ..cache.layout import RUN_RECORDS_DIR
from ..config import BuildConfig
from ..config.loading import load_config
from ..errors import ConfigError
from ..report.stats_report import stats
from ..report.token_statistics import TokenStats
from ..verification.deep import verify_deep
from ..verification.quality import QualityThresholds
from ..verification.reencode import Overrides
from .tiny_text_model import make_tiny_t5
from .tiny_tokenizer import make_tiny_cosmos_dv
from .world import make_world

DV_DEMO = "cosmos-dv8x16x16"


@dataclass
class DemoReport:
    root: Path
    num_samples: int
    num_rejects: int
    latent_shape: tuple[int, ...]
    text_shape: tuple[int, ...]
    cache_bytes: int
    seconds: float
    psnr_db: dict[str, float]
    verified: bool
    tokens: TokenStats | None = None  # a discrete-token demo's statistics (latentforge stats)


DEMO_TOKENIZERS = ("haar-4x8x8", DV_DEMO)
DEMO_ENTRIES = ("world", "models", "cache")  # what the demo writes into its folder, and all it may hold


def _check_demo_folder(folder: Path) -> None:
    """ConfigError unless `folder` is new, empty or an earlier demo's: the demo rewrites its world and models."""
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"--out {folder} is a file; give the demo a new folder")
    other = sorted(p.name for p in folder.iterdir() if p.name not in DEMO_ENTRIES) if folder.is_dir() else []
    if other:
        raise ConfigError(f"--out {folder} holds files the demo did not write ({', '.join(other[:5])}); nothing was "
                          "written. Give the demo a new folder")


def demo_config(world: Path, table: Path, model: Path, root: Path, device: str,
                tokenizer: dict[str, str] | None = None) -> BuildConfig:
    return load_config(
        preset="openvid-perception-stage1",
        extra={
            "dataset": {
                "reader": "table",
                "path": [str(table)],
                "id_column": "id",
                "mask_column": "mask",
                "depth_column": "depth",
                "passthrough_columns": ["objects"],
            },
            "frames": {"num_frames": 17, "height": 64, "width": 96},
            "modalities": {"mask": {"ids": [0, 1, 2, 3]}},
            "tokenizer": tokenizer or {"name": "haar-4x8x8", "precision": "fp32"},
            "text": {"name": "t5", "path": str(model), "precision": "fp32"},
            "output": {"root": str(root), "rows_per_shard": 4, "unit_size": 4, "batch_size": 2},
            "run": {"device": device},
        },
    )


def run_demo(folder: Path, device: str = "cpu", quiet: bool = False, tokenizer: str = "haar-4x8x8") -> DemoReport:
    if tokenizer not in DEMO_TOKENIZERS:
        raise ConfigError(f"--tokenizer {tokenizer!r}: the demo runs {' or '.join(DEMO_TOKENIZERS)}")
    started = time.perf_counter()
    folder = Path(folder)
    _check_demo_folder(folder)
    world = folder / "world"
    table = make_world(world)
    captions = [row["caption"] for row in _csv_rows(table)]
    model = make_tiny_t5(folder / "models" / "tiny-t5", corpus=captions * 4)
    root = folder / "cache"
    discrete = tokenizer == DV_DEMO
    chosen = None
    if discrete:
        checkpoint = make_tiny_cosmos_dv(folder / "models")
        chosen = {"name": DV_DEMO, "checkpoint": str(checkpoint), "precision": "fp32"}
    config = demo_config(world, table, model, root, device, chosen)
    result = build(config, overwrite=True, quiet=quiet)
    # an untrained tokenizer decodes to noise: its PSNR is reported, not judged
    thresholds = QualityThresholds(-np.inf, -np.inf, -np.inf, -np.inf) if discrete else QualityThresholds()
    report = verify_deep(root, indices=[0, 1, 2], overrides=Overrides(device=device),
                         thresholds=thresholds)  # integrity included
    tokens = stats(root).stats.tokens if discrete else None  # written to ROOT/build/stats
    cache_config = CacheConfig.load(root)
    text = cache_config.text
    cache_bytes = sum(p.stat().st_size for p in root.rglob("*")
                      if p.is_file() and RUN_RECORDS_DIR not in p.relative_to(root).parts)
    return DemoReport(
        root=root,
        num_samples=result.num_samples,
        num_rejects=sum(result.rejects_by_reason.values()),
        latent_shape=cache_config.latent.shape,
        text_shape=(text.max_length, text.dim),
        cache_bytes=cache_bytes,
        seconds=time.perf_counter() - started,
        psnr_db={name: float(np.mean([q.psnr_db for q in report.quality if q.modality == name]))
                 for name in config.modalities.names},
        verified=report.ok,
        tokens=tokens,
    )


def _csv_rows(table: Path) -> list[dict[str, str]]:
    import csv

    with open(table, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))
