"""Tiny staged units and committed caches for the commit/verify tests (fake latents and text, no video)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from latentforge.commit import CacheLayout, CommitResult, commit_cache
from latentforge.records import Reject
from latentforge.writers.staging import StagedRow, write_staged_unit

LATENT_SHAPE = (48, 3, 6, 8)
MAX_LENGTH, TEXT_DIM = 16, 32
NUM_CANDIDATES = 24
UNIT_REJECTS = {3: "decode_error", 10: "too_short", 17: "missing_caption"}
PLAN_REJECTS = [Reject("zz-dup", -1, "duplicate_id", "id seen twice in the table", "plan"),
                Reject("aa-noclip", -1, "missing_source", "video file not found", "plan")]


@dataclass
class SampleData:
    """Everything the fake encoder produced, by source_index: the reference a committed cache must match."""

    latents: dict[int, np.ndarray]
    embeddings: dict[int, np.ndarray]
    lengths: dict[int, int]

    @property
    def accepted(self) -> list[int]:
        return sorted(self.latents)


def make_samples(seed: int = 0) -> SampleData:
    rng = np.random.default_rng(seed)
    latents, embeddings, lengths = {}, {}, {}
    for index in range(NUM_CANDIDATES):
        if index in UNIT_REJECTS:
            continue
        latents[index] = rng.standard_normal(LATENT_SHAPE).astype(np.float16)
        length = int(rng.integers(1, MAX_LENGTH + 1))
        text = rng.standard_normal((MAX_LENGTH, TEXT_DIM)).astype(np.float16)
        text[length:] = 0
        embeddings[index], lengths[index] = text, length
    return SampleData(latents, embeddings, lengths)


def sample_id(index: int) -> str:
    return f"clips/vid_{index:03d}"


def stage_units(build_dir: Path, data: SampleData, unit_size: int, text: bool = True) -> list[Path]:
    """Stage units of `unit_size` consecutive source indices, batches of 2, in reverse order of units."""
    paths = []
    starts = list(range(0, NUM_CANDIDATES, unit_size))
    for unit in reversed(range(len(starts))):
        indices = range(starts[unit], min(starts[unit] + unit_size, NUM_CANDIDATES))
        kept = [i for i in indices if i in data.latents]
        rows = [StagedRow(sample_id=sample_id(i), source_index=i, prompt=f"a clip number {i} ünïcode",
                          prompt_truncated=i == 5, source_path=f"videos/vid_{i:03d}.mp4", unit=unit, batch=k // 2,
                          provenance={"frame_indices": [0, 1, 2], "source_fps": 24.0, "crop_box": [0, 0, 64, 48]},
                          extra={"split": "train"}) for k, i in enumerate(kept)]
        rejects = [Reject(sample_id(i), i, UNIT_REJECTS[i], f"fake {UNIT_REJECTS[i]}", "decode")
                   for i in indices if i in UNIT_REJECTS]
        latents = np.stack([data.latents[i] for i in kept]) if kept else np.zeros((0, *LATENT_SHAPE), np.float16)
        embeddings = np.stack([data.embeddings[i] for i in kept]) if text else None
        lengths = np.array([data.lengths[i] for i in kept], dtype=np.int64) if text else None
        paths.append(write_staged_unit(build_dir, unit, rows, latents, embeddings, lengths, rejects))
    return paths


def make_layout(rows_per_shard: int = 8, text: bool = True) -> CacheLayout:
    return CacheLayout(latent_dataset="perception_latent_state", latent_shape=LATENT_SHAPE, storage_dtype="float16",
                       rows_per_shard=rows_per_shard, text_prefix="t5" if text else None,
                       text_dim=TEXT_DIM if text else None, max_length=MAX_LENGTH)


def make_cache_config(layout: CacheLayout) -> dict:
    """A cache_config with the contract's keys and order; the counts are left to commit."""
    text = None
    if layout.text_prefix is not None:
        text = {"name": "t5", "embeddings_dataset": layout.embeddings_dataset, "length_dataset": layout.length_dataset,
                "dim": layout.text_dim, "max_length": layout.max_length, "empty_prompt": True}
    return {
        "format": "latentforge-cache", "format_version": 1, "latentforge_version": "0.1.0",
        "preset": "openvid-perception-stage1", "storage_dtype": layout.storage_dtype,
        "latent": {"dataset": layout.latent_dataset, "shape": list(layout.latent_shape),
                   "modalities": [{"name": "rgb", "channels": [0, 16], "role": "conditioning+target"},
                                  {"name": "mask", "channels": [16, 32], "role": "target"},
                                  {"name": "depth", "channels": [32, 48], "role": "target"}],
                   "conditioning": {"modality": "rgb", "latent_frames": [0, 1]}, "normalization": "tokenizer"},
        "tokenizer": {"name": "haar-4x8x8", "checkpoint_sha256": None, "precision": "fp32"},
        "text": text,
        "frames": {"num_frames": 9, "height": 48, "width": 64, "fps": "source", "resize": "cover_crop"},
        "build": {"unit_size": 6, "batch_size": 2, "seed": 0},
    }


def empty_prompt_arrays() -> tuple[np.ndarray, np.ndarray]:
    embeddings = np.zeros((1, MAX_LENGTH, TEXT_DIM), np.float16)
    embeddings[0, 0] = np.linspace(-1, 1, TEXT_DIM)
    return embeddings, np.array([1], np.int64)  # lengths as the text encoder returns them


def build_cache(root: Path, data: SampleData | None = None, unit_size: int = 6, rows_per_shard: int = 8,
                text: bool = True) -> CommitResult:
    data = data or make_samples()
    layout = make_layout(rows_per_shard, text)
    units = stage_units(root / "build", data, unit_size, text)
    return commit_cache(root, layout, units, PLAN_REJECTS, make_cache_config(layout),
                        empty_prompt_arrays() if text else None,
                        {"text_note": "text embeddings come from an untrained tiny T5 (tests)."})
