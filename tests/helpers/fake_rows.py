"""Tiny staged units and committed caches for the commit/verify tests (fake latents and text, no video)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from latentforge.cache.config_file import CacheConfig
from latentforge.cache.config_sections import LatentSection, ModalityEntry, TextSection
from latentforge.cache.layout import ShardSchema
from latentforge.records import Reject
from latentforge.sinks.hdf5.commit import CommitResult, commit_cache
from latentforge.staging.staged_unit_writer import write_staged_unit
from latentforge.staging.staged_units import StagedRow
from latentforge.version import __version__

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


def make_samples(seed: int = 0, text_dim: int = TEXT_DIM) -> SampleData:
    rng = np.random.default_rng(seed)
    latents, embeddings, lengths = {}, {}, {}
    for index in range(NUM_CANDIDATES):
        if index in UNIT_REJECTS:
            continue
        latents[index] = rng.standard_normal(LATENT_SHAPE).astype(np.float16)
        length = int(rng.integers(1, MAX_LENGTH + 1))
        text = rng.standard_normal((MAX_LENGTH, text_dim)).astype(np.float16)
        text[length:] = 0
        embeddings[index], lengths[index] = text, length
    return SampleData(latents, embeddings, lengths)


def sample_id(index: int) -> str:
    return f"clips/vid_{index:03d}"


def planned_units(unit_size: int) -> dict[int, list[int]]:
    """The plan stage_units follows: {unit: source_index of its candidates}, every NUM_CANDIDATES in order."""
    return {unit: list(range(start, min(start + unit_size, NUM_CANDIDATES)))
            for unit, start in enumerate(range(0, NUM_CANDIDATES, unit_size))}


def stage_units(build_dir: Path, data: SampleData, unit_size: int, text: bool = True,
                encoded_by: Callable[[int], dict] | None = None) -> list[Path]:
    """Stage units of `unit_size` consecutive source indices, batches of 2, in reverse order of units;
    `encoded_by(unit)` says which encoder made each (none recorded by default)."""
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
        paths.append(write_staged_unit(build_dir, unit, rows, latents, embeddings, lengths, rejects,
                                       encoded_by(unit) if encoded_by else None))
    return paths


# a Wan2.1 VAE cache's fingerprint, as the exports to Wan trainers require (the rows themselves are generated)
WAN21_TOKENIZER = {"name": "wan2.1", "checkpoint_sha256": None, "precision": "fp32"}


def make_cache_config(rows_per_shard: int = 8, text: bool = True, text_storage: str = "padded",
                      text_dim: int = TEXT_DIM, tokenizer: dict[str, Any] | None = None) -> CacheConfig:
    """A cache_config with the contract's typed sections and only a few recorded settings; counts left at 0."""
    text_section = None
    if text:
        details = {} if text_storage == "padded" else {"storage": text_storage}
        text_section = TextSection("t5", "t5_text_embeddings", "t5_text_length", text_dim, MAX_LENGTH, True, details)
    modalities = (ModalityEntry("rgb", (0, 16), "conditioning+target"), ModalityEntry("mask", (16, 32), "target"),
                  ModalityEntry("depth", (32, 48), "target"))
    return CacheConfig(
        latentforge_version=__version__, preset="openvid-perception-stage1", num_samples=0, num_shards=0,
        rows_per_shard=rows_per_shard, storage_dtype="float16",
        latent=LatentSection("perception_latent_state", LATENT_SHAPE, modalities, "rgb", (0, 1), "tokenizer"),
        tokenizer=tokenizer or {"name": "haar-4x8x8", "checkpoint_sha256": None, "precision": "fp32"},
        text=text_section,
        frames={"num_frames": 9, "height": 48, "width": 64, "fps": "source", "resize": "cover_crop"},
        build={"unit_size": 6, "batch_size": 2, "seed": 0},
    )


def make_schema(rows_per_shard: int = 8, text: bool = True) -> ShardSchema:
    return make_cache_config(rows_per_shard, text).shard_schema()


def empty_prompt_arrays(text_dim: int = TEXT_DIM) -> tuple[np.ndarray, np.ndarray]:
    embeddings = np.zeros((1, MAX_LENGTH, text_dim), np.float16)
    embeddings[0, 0] = np.linspace(-1, 1, text_dim)
    return embeddings, np.array([1], np.int64)  # lengths as the text encoder returns them


def build_cache(root: Path, data: SampleData | None = None, unit_size: int = 6, rows_per_shard: int = 8,
                text: bool = True, text_storage: str = "padded",
                tokenizer: dict[str, Any] | None = None) -> CommitResult:
    """`tokenizer`: the fingerprint cache_config.json records (default: haar-4x8x8's)."""
    data = data or make_samples()
    text_dim = next(iter(data.embeddings.values())).shape[1]  # the width make_samples drew
    units = stage_units(root / "build", data, unit_size, text)
    config = make_cache_config(rows_per_shard, text, text_storage, text_dim, tokenizer)
    return commit_cache(root, units, PLAN_REJECTS, config,
                        empty_prompt_arrays(text_dim) if text else None,
                        {"text_note": "text embeddings come from an untrained tiny T5 (tests)."},
                        planned_units(unit_size))
