"""Synthetic caches for the tiny trainer, the loader bench and tests, written by the real commit: rows are staged
as units and committed, so the result is a complete, checksummed, verified cache in the format of every build.

No video and no tokenizer: rows are generated. "structured" content is learnable (per-class patterns that move
over latent frames; mask and depth are functions of RGB; the text embedding names the class), so a model
trained on it must beat a constant predictor. "noise" content is a cheap fill of realistic size for I/O work.
With `vocabulary` set the rows are token ids of a discrete-token cache (one id stream per modality): each class
walks the vocabulary in its own stride from its own start, one id in ten replaced at random, so a next-token model
can learn it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..cache.config_file import PIXEL_RANGE, CacheConfig
from ..cache.config_sections import CONDITIONING_ROLE, LatentSection, ModalityEntry, TextSection, TokenSection
from ..cache.layout import RUN_RECORDS_DIR, text_datasets
from ..config.checks import token_storage_dtype
from ..errors import ConfigError
from ..records import Reject
from ..sinks.hdf5.commit import commit_cache
from ..staging.staged_unit_writer import write_staged_unit
from ..staging.staged_units import StagedRow
from ..version import __version__

CLASSES = ("red circle", "blue square", "yellow circle", "green square")
SOURCE_FPS = 24.0
STAGED_UNIT = 16  # samples per staged unit: bounds memory while writing realistic sizes
BATCH = 4  # samples per recorded batch


@dataclass(frozen=True)
class SyntheticCacheSpec:
    num_samples: int = 24
    modalities: tuple[str, ...] = ("rgb", "mask", "depth")
    channels: int = 16  # latent channels per modality
    latent_frames: int = 3
    latent_height: int = 4
    latent_width: int = 6
    text_name: str | None = "t5"  # None: a cache without text
    text_dim: int = 32
    max_length: int = 16
    text_length: int | None = None  # tokens of every caption; None: 3 to 7, by sample
    text_storage: str = "padded"  # padded | trimmed (docs/text.md)
    rows_per_shard: int = 10
    storage_dtype: str = "float16"
    latent_dataset: str = "perception_latent_state"
    content: str = "structured"  # structured | noise
    seed: int = 0
    vocabulary: int = 0  # > 0: token ids in [0, vocabulary) (channels must be 1); 0: float latents
    fsq_levels: tuple[int, ...] | None = None  # recorded with the ids; their product is the vocabulary
    tokenizer: dict[str, Any] = field(
        default_factory=lambda: {"name": "wan2.1", "checkpoint_sha256": "0" * 64, "precision": "cosmos-bf16",
                                 "latent_channels": 16, "temporal_factor": 4, "spatial_factor": 8, "causal": True}
    )

    @property
    def latent_shape(self) -> tuple[int, int, int, int]:
        return (self.channels * len(self.modalities), self.latent_frames, self.latent_height, self.latent_width)

    @property
    def num_frames(self) -> int:
        return (self.latent_frames - 1) * 4 + 1


def write_synthetic_cache(root: str | Path, spec: SyntheticCacheSpec = SyntheticCacheSpec()) -> Path:
    """Write a complete cache under `root` (created); return the root."""
    root = Path(root)
    if spec.vocabulary and (spec.channels != 1 or spec.content != "structured"):
        raise ConfigError(f"a token cache has one id stream per modality and structured content; got "
                          f"channels={spec.channels}, content={spec.content!r}")
    rows = _Rows(spec)
    dtype = token_storage_dtype(spec.vocabulary) if spec.vocabulary else spec.storage_dtype
    staging = root / RUN_RECORDS_DIR
    units = []
    planned: dict[int, list[int]] = {}
    rejected = set(rows.rejected())
    last = rows.source_index(spec.num_samples - 1)
    for unit, start in enumerate(range(0, last + 1, STAGED_UNIT)):
        sources = range(start, min(start + STAGED_UNIT, last + 1))
        planned[unit] = list(sources)
        kept = [rows.dataset_index(s) for s in sources if s not in rejected]
        staged = [rows.staged_row(index, unit, k // BATCH) for k, index in enumerate(kept)]
        latents = np.stack([rows.sample(i) for i in kept]).astype(dtype)
        texts = [rows.text(i) for i in kept] if spec.text_name is not None else None
        units.append(write_staged_unit(
            staging, unit, staged, latents,
            None if texts is None else np.stack([t for t, _ in texts]).astype(spec.storage_dtype),
            None if texts is None else np.array([n for _, n in texts], dtype=np.int64),
            [Reject(f"clip{s:05d}", s, "too_short", "synthetic reject", "probe") for s in sources if s in rejected]))
    empty = None
    if spec.text_name is not None:
        text, length = rows.text(None)
        empty = (text[None].astype(spec.storage_dtype), np.array([length], dtype=np.int64))
    commit_cache(root, units, [], _cache_config(spec), empty,
                 {"title": "Synthetic latentforge cache", "description": "Generated rows, no video and no tokenizer."},
                 planned)
    return root


class _Rows:
    """Deterministic row contents; every fifth source sample is "rejected" so source_index has gaps."""

    def __init__(self, spec: SyntheticCacheSpec):
        self.spec = spec
        rng = np.random.default_rng(spec.seed)
        c, h, w = spec.channels, spec.latent_height, spec.latent_width
        self.patterns = rng.standard_normal((len(CLASSES), c, h, w))
        self.motion = rng.standard_normal((len(CLASSES), c, h, w)) * 0.5
        self.mixes = rng.standard_normal((len(spec.modalities), c, c)) / np.sqrt(c)
        self.words = rng.standard_normal((len(CLASSES) + 1, spec.text_dim))
        if spec.content == "noise":
            self.noise = rng.standard_normal(int(np.prod(spec.latent_shape))).astype(spec.storage_dtype)

    def source_index(self, index: int) -> int:
        return index + index // 4

    def dataset_index(self, source_index: int) -> int:
        return source_index - source_index // 5

    def rejected(self) -> list[int]:
        last = self.source_index(self.spec.num_samples - 1)
        kept = {self.source_index(i) for i in range(self.spec.num_samples)}
        return [s for s in range(last) if s not in kept]

    def text(self, index: int | None) -> tuple[np.ndarray, int]:
        spec = self.spec
        word = len(CLASSES) if index is None else index % len(CLASSES)
        length = 1 if index is None else min(spec.max_length, spec.text_length or 3 + index % 5)
        rng = np.random.default_rng((spec.seed, 1, 0 if index is None else index + 1))
        text = np.zeros((spec.max_length, spec.text_dim), dtype=np.float32)
        text[:length] = self.words[word] + 0.1 * rng.standard_normal((length, spec.text_dim))
        return text, length

    def sample(self, index: int) -> np.ndarray:
        spec = self.spec
        if spec.vocabulary:
            return self.tokens(index)
        if spec.content == "noise":
            return np.roll(self.noise, index).reshape(spec.latent_shape)
        rng = np.random.default_rng((spec.seed, 0, index))
        k = index % len(CLASSES)
        amplitude = rng.uniform(0.5, 1.5)
        frames = np.arange(spec.latent_frames)[None, :, None, None]
        rgb = amplitude * self.patterns[k][:, None] + frames * self.motion[k][:, None]
        rgb = rgb + 0.05 * rng.standard_normal(rgb.shape)
        parts = [np.tanh(np.einsum("dc,cthw->dthw", mix, rgb)) if i else rgb for i, mix in enumerate(self.mixes)]
        return np.concatenate(parts, axis=0)

    def tokens(self, index: int) -> np.ndarray:
        """[M, T', H', W'] ids: in raster order, class k steps by 2k+1 from start 37k (+ 11 per modality); one id in
        ten random."""
        spec = self.spec
        rng = np.random.default_rng((spec.seed, 2, index))
        length = spec.latent_frames * spec.latent_height * spec.latent_width
        k = index % len(CLASSES)
        starts = 37 * k + 11 * np.arange(len(spec.modalities))[:, None]
        walk = starts + (2 * k + 1) * np.arange(length)
        walk = np.where(rng.random(walk.shape) < 0.1, rng.integers(spec.vocabulary, size=walk.shape), walk)
        return (walk % spec.vocabulary).reshape(len(spec.modalities), spec.latent_frames, spec.latent_height,
                                                spec.latent_width)

    def staged_row(self, index: int, unit: int, batch: int) -> StagedRow:
        spec = self.spec
        width, height = spec.latent_width * 8, spec.latent_height * 8
        source = self.source_index(index)
        provenance = {
            "frame_indices": list(range(spec.num_frames)),
            "timestamps": [round(f / SOURCE_FPS, 6) for f in range(spec.num_frames)],
            "source_fps": SOURCE_FPS,
            "source_size": [width, height],
            "rotation": 0,
            "crop_box": [0, 0, width, height],
        }
        return StagedRow(sample_id=f"clip{source:05d}", source_index=source,
                         prompt=f"a {CLASSES[index % len(CLASSES)]} moving, clip {index}", prompt_truncated=False,
                         source_path=f"videos/clip{source:05d}.mp4", unit=unit, batch=batch, provenance=provenance,
                         extra={})


def _cache_config(spec: SyntheticCacheSpec) -> CacheConfig:
    text = None
    if spec.text_name is not None:
        embeddings, lengths = text_datasets(spec.text_name)
        details = {} if spec.text_storage == "padded" else {"storage": spec.text_storage}
        text = TextSection(spec.text_name, embeddings, lengths, spec.text_dim, spec.max_length, True, details)
    tokens, tokenizer = None, dict(spec.tokenizer)
    if spec.vocabulary:
        tokens = TokenSection(token_storage_dtype(spec.vocabulary), spec.vocabulary, spec.fsq_levels,
                              (spec.latent_frames, spec.latent_height, spec.latent_width))
        tokenizer.update({"latent_channels": 1, "output": "tokens", "vocabulary": spec.vocabulary,
                          "fsq_levels": None if spec.fsq_levels is None else list(spec.fsq_levels)})
    modalities = tuple(ModalityEntry(name, (i * spec.channels, (i + 1) * spec.channels),
                                     CONDITIONING_ROLE if name == "rgb" else "target")
                       for i, name in enumerate(spec.modalities))
    return CacheConfig(
        latentforge_version=__version__, preset=None, num_samples=0, num_shards=0,
        rows_per_shard=spec.rows_per_shard, storage_dtype=spec.storage_dtype,
        latent=LatentSection(spec.latent_dataset, spec.latent_shape, modalities, "rgb", (0, 1), "tokenizer", tokens),
        tokenizer=tokenizer, text=text,
        frames={"num_frames": spec.num_frames, "height": spec.latent_height * 8, "width": spec.latent_width * 8,
                "fps": "source", "window": "start", "windows": "one", "resize": "cover_crop",
                "resize_backend": "swscale", "resize_filter": "bicubic", "pixel_range": PIXEL_RANGE},
        modalities={"names": list(spec.modalities)}, dataset={"reader": "synthetic"},
        build={"unit_size": STAGED_UNIT, "batch_size": BATCH, "seed": spec.seed},
    )
