"""The one function that runs a unit of work: decode -> transform -> tokenize -> text-encode -> stage.

Executors only decide where a unit runs; what a unit produces depends on nothing but its samples, the config
and the models (DESIGN §5).
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..config import BuildConfig
from ..errors import SampleRejected
from ..probe import ProbeResult
from ..records import Reject, Sample, SamplePixels
from ..samples import load_sample_pixels
from ..text.base import TextEncoder
from ..text.prompt_cache import PromptCache
from ..tokenizers.base import Tokenizer, pixels_to_input
from ..writers.staging import StagedRow, write_staged_unit


@dataclass(frozen=True)
class Unit:
    """A contiguous range of source_index values and what the probe found for each."""

    index: int
    samples: tuple[Sample, ...]
    probes: dict[int, ProbeResult | Reject]


@dataclass
class UnitContext:
    """What a worker holds for its whole life: config, models, and the per-stage clock."""

    config: BuildConfig
    build_dir: Path
    tokenizer: Tokenizer
    text: PromptCache | None
    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    samples_done: int = 0

    @property
    def storage_dtype(self) -> np.dtype:
        return np.dtype(self.config.output.storage_dtype)


def cut_units(samples: list[Sample], probes: dict[int, ProbeResult | Reject], unit_size: int) -> list[Unit]:
    units = []
    for start in range(0, len(samples), unit_size):
        chunk = tuple(samples[start : start + unit_size])
        units.append(Unit(start // unit_size, chunk, {s.source_index: probes[s.source_index] for s in chunk}))
    return units


def _encode_batch(batch: list[SamplePixels], ctx: UnitContext) -> np.ndarray:
    """[B, C_total, T', H', W'] in the storage dtype: each modality through the tokenizer, channels concatenated."""
    latents = []
    for name in ctx.config.modalities.names:
        stacked = np.stack([pixels.modalities[name] for pixels in batch])
        video = pixels_to_input(stacked, ctx.tokenizer.device)
        with torch.inference_mode():
            latents.append(ctx.tokenizer.encode(video).float().cpu())
    return torch.cat(latents, dim=1).numpy().astype(ctx.storage_dtype)


def run_unit(unit: Unit, ctx: UnitContext) -> Path:
    """Run one unit and stage its result atomically; returns the staged file."""
    batch_size = ctx.config.output.batch_size
    rows: list[dict] = []  # StagedRow fields; prompt_truncated is known only after text encoding
    latents: list[np.ndarray] = []
    rejects: list[Reject] = []
    prompts: list[str] = []
    pending: list[SamplePixels] = []

    def flush() -> None:
        if not pending:
            return
        started = time.perf_counter()
        latents.append(_encode_batch(pending, ctx))
        ctx.seconds["encode"] += time.perf_counter() - started
        pending.clear()

    for sample in unit.samples:
        probe = unit.probes[sample.source_index]
        if isinstance(probe, Reject):
            rejects.append(probe)
            continue
        started = time.perf_counter()
        try:
            pixels = load_sample_pixels(sample, probe, ctx.config)
        except SampleRejected as error:
            rejects.append(Reject(sample.sample_id, sample.source_index, error.reason, error.detail, "decode"))
            continue
        finally:
            ctx.seconds["decode"] += time.perf_counter() - started
        rows.append(
            dict(
                sample_id=sample.sample_id,
                source_index=sample.source_index,
                prompt=probe.caption,
                prompt_truncated=False,
                source_path=sample.entry.video_rel,
                unit=unit.index,
                batch=len(rows) // batch_size,
                provenance=pixels.provenance,
                extra=dict(sample.entry.extra),
            )
        )
        prompts.append(probe.caption)
        pending.append(pixels)
        if len(pending) == batch_size:
            flush()
    flush()

    text_embeddings = text_lengths = None
    if ctx.text is not None and rows:
        started = time.perf_counter()
        encoded = ctx.text.encode(prompts)
        ctx.seconds["text"] += time.perf_counter() - started
        text_embeddings = encoded.embeddings.astype(ctx.storage_dtype)
        text_lengths = encoded.lengths
        for row, truncated in zip(rows, encoded.truncated):
            row["prompt_truncated"] = bool(truncated)

    started = time.perf_counter()
    if latents:
        stacked = np.concatenate(latents)
    else:
        stacked = np.zeros((0,), dtype=ctx.storage_dtype)
    staged_rows = [StagedRow(**row) for row in rows]
    path = write_staged_unit(ctx.build_dir, unit.index, staged_rows, stacked, text_embeddings, text_lengths, rejects)
    ctx.seconds["stage"] += time.perf_counter() - started
    ctx.samples_done += len(unit.samples)
    return path
