"""Dataset-level statistics of a cache, streamed one sample at a time (memory flat in cache size).

Per modality: per-channel and per-channel x per-latent-frame mean/std (population, ddof=0: what trainers
normalise with), min/max, the fraction of values with |x| >= `extreme`, and a fixed-bin value histogram.
Also the text-length histogram, truncated prompts, the captions' unknown-token fractions, rejects by reason and
samples per source folder.
Means and variances are merged exactly in float64 (Chan et al.), so they equal numpy's float64 statistics
of the stored arrays up to rounding. A discrete-token cache gets token statistics (token_statistics.py) in place
of the per-channel ones. docs/stats.md describes every field.
"""

from __future__ import annotations

import posixpath
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from .. import registry
from ..cache.config_file import CacheConfig
from ..cache.hdf5_files import reading
from ..cache.layout import MANIFEST, REJECTS
from ..cache.rows import read_manifest, read_rejects
from ..errors import ConfigError
from ..io import atomic_path
from ..progress import Progress, start_step
from .audio_statistics import AudioCoverage, AudioCoverageAccumulator
from .conditioning_statistics import conditioning_stats
from .token_statistics import TokenAccumulator, TokenStats
from .unknown_token_statistics import UnknownTokenAccumulator, UnknownTokenStats

HISTOGRAM_EDGES = np.linspace(-8.0, 8.0, 65)  # beyond these, values count as under/overflow
DEFAULT_EXTREME = 6.0
COSMOS_FRAMES = 32  # Cosmos-Predict2 reshapes video_mean/video_std to (1, 16, 32, 1, 1)
COSMOS_GEOMETRY = (16, 4, 8)  # Wan2.1's latent channels, temporal and spatial factors


class Moments:
    """Running count, mean and sum of squared deviations per (channel, frame), merged exactly in float64."""

    def __init__(self, channels: int, frames: int):
        self.count = 0  # values per (channel, frame) cell
        self.mean = np.zeros((channels, frames))
        self.m2 = np.zeros((channels, frames))

    def add(self, block: np.ndarray) -> None:
        """Merge one sample's [C, T', H', W'] values."""
        n = block.shape[2] * block.shape[3]
        mean = block.mean(axis=(2, 3))
        m2 = ((block - mean[:, :, None, None]) ** 2).sum(axis=(2, 3))
        total = self.count + n
        delta = mean - self.mean
        self.mean += delta * (n / total)
        self.m2 += m2 + delta**2 * (self.count * n / total)
        self.count = total

    def over_frames(self, frames: slice = slice(None)) -> tuple[np.ndarray, np.ndarray]:
        """(mean, population std) per channel over the selected frames; every cell has the same count."""
        mean = self.mean[:, frames].mean(axis=1)
        m2 = self.m2[:, frames].sum(axis=1) + self.count * ((self.mean[:, frames] - mean[:, None]) ** 2).sum(axis=1)
        cells = self.mean[:, frames].shape[1]
        return mean, np.sqrt(m2 / (self.count * cells))

    def per_frame(self) -> tuple[np.ndarray, np.ndarray]:
        return self.mean.copy(), np.sqrt(self.m2 / self.count)


@dataclass
class ModalityStats:
    name: str
    channels: tuple[int, int]  # [lo, hi) in the stored latent
    values_per_channel: int
    mean: list[float]
    std: list[float]
    min: list[float]
    max: list[float]
    extreme_fraction: list[float]
    frame_mean: list[list[float]]  # [channel][latent frame]
    frame_std: list[list[float]]
    first_frame_mean: list[float]  # latent frame 0 alone: what a causal tokenizer gives for one image
    first_frame_std: list[float]
    later_frames_mean: list[float]  # frames 1.. together (empty when T' == 1)
    later_frames_std: list[float]
    histogram: list[int]  # counts per HISTOGRAM_EDGES bin
    underflow: int
    overflow: int


@dataclass
class CacheStats:
    num_samples: int
    latent_dataset: str
    latent_shape: list[int]
    storage_dtype: str
    extreme: float
    histogram_edges: list[float]
    modalities: list[ModalityStats]
    text_lengths: dict[int, int] | None  # length -> samples; None for a cache without text
    max_length: int | None
    truncated_prompts: int
    rejects_by_reason: dict[str, int]
    samples_per_source: dict[str, int]  # parent folder of source_path -> samples
    rows_read: list[int] = field(default_factory=list)  # [first, step] of the rows used
    tokens: TokenStats | None = None  # a discrete-token cache's (its `modalities` is then empty)
    conditioning: dict[str, Any] | None = None  # each conditioning stream's summary (conditioning_statistics.py)
    # the captions' unknown-token fractions (unknown_token_statistics.py); None for a cache without text
    unknown_tokens: UnknownTokenStats | None = None
    audio: AudioCoverage | None = None  # a cache with sound: its coverage (audio_statistics.py)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        if self.tokens is None:
            del data["tokens"]  # a latent cache's stats.json as before
        else:
            data["tokens"]["sequence_lengths"] = {str(k): v for k, v in self.tokens.sequence_lengths.items()}
        if self.conditioning is None:
            del data["conditioning"]
        if self.unknown_tokens is None:
            del data["unknown_tokens"]
        if self.audio is None:  # a cache without sound: stats.json as before
            del data["audio"]
        if self.text_lengths is not None:
            data["text_lengths"] = {str(k): v for k, v in sorted(self.text_lengths.items())}
        return data

    def modality(self, name: str) -> ModalityStats:
        for stats in self.modalities:
            if stats.name == name:
                return stats
        raise ConfigError(f"modality {name!r} is not in this cache; it has {[m.name for m in self.modalities]}")


class _ModalityAccumulator:
    def __init__(self, name: str, channels: tuple[int, int], frames: int, extreme: float):
        count = channels[1] - channels[0]
        self.name, self.channels, self.extreme = name, channels, extreme
        self.moments = Moments(count, frames)
        self.low = np.full(count, np.inf)
        self.high = np.full(count, -np.inf)
        self.extremes = np.zeros(count, dtype=np.int64)
        self.histogram = np.zeros(len(HISTOGRAM_EDGES) - 1, dtype=np.int64)
        self.underflow = self.overflow = 0

    def add(self, latent: np.ndarray) -> None:
        block = latent[self.channels[0] : self.channels[1]].astype(np.float64)
        self.moments.add(block)
        self.low = np.minimum(self.low, block.min(axis=(1, 2, 3)))
        self.high = np.maximum(self.high, block.max(axis=(1, 2, 3)))
        self.extremes += (np.abs(block) >= self.extreme).sum(axis=(1, 2, 3))
        self.histogram += np.histogram(block, bins=HISTOGRAM_EDGES)[0]
        self.underflow += int((block < HISTOGRAM_EDGES[0]).sum())
        self.overflow += int((block > HISTOGRAM_EDGES[-1]).sum())

    def result(self) -> ModalityStats:
        m = self.moments
        mean, std = m.over_frames()
        frame_mean, frame_std = m.per_frame()
        first_mean, first_std = m.over_frames(slice(0, 1))
        later = m.over_frames(slice(1, None)) if m.mean.shape[1] > 1 else (np.zeros(0), np.zeros(0))
        values = m.count * m.mean.shape[1]
        return ModalityStats(
            self.name, self.channels, values, mean.tolist(), std.tolist(), self.low.tolist(), self.high.tolist(),
            (self.extremes / values).tolist(), frame_mean.tolist(), frame_std.tolist(), first_mean.tolist(),
            first_std.tolist(), later[0].tolist(), later[1].tolist(), self.histogram.tolist(), self.underflow,
            self.overflow)


def compute_stats(root: Path, extreme: float = DEFAULT_EXTREME, every: int = 1,
                  progress: Progress | None = None) -> CacheStats:
    """Statistics of every `every`-th sample of the cache at `root` (all of them by default).
    progress("read", samples to read) returns the function advanced by 1 per sample read."""
    root = Path(root)
    if every < 1:
        raise ConfigError(f"--every {every}: use 1 (every sample) or a larger stride")
    config = CacheConfig.load(root)
    # the records first: a damaged one stops the run before the shards are read
    truncated, sources, sample_ids = 0, Counter(), {}
    unknown = None if config.text is None else UnknownTokenAccumulator(config.text.max_unknown_fraction)
    audio = None if config.audio is None else AudioCoverageAccumulator(config.audio.sample_rate)
    if (root / MANIFEST).is_file():
        for manifest_row in read_manifest(root):
            sample_ids[manifest_row.dataset_index] = manifest_row.sample_id
            truncated += int(manifest_row.prompt_truncated)
            sources[posixpath.dirname(manifest_row.source_path) or "."] += 1
            if unknown is not None:
                unknown.add(manifest_row)
            if audio is not None:
                audio.add(manifest_row)
    rejects = Counter(r.reason for r in read_rejects(root)) if (root / REJECTS).is_file() else Counter()
    latent = config.latent
    tokens = None if latent.tokens is None else TokenAccumulator(latent.tokens)
    accumulators = [] if tokens is not None else [_ModalityAccumulator(m.name, m.channels, latent.shape[1], extreme)
                                                  for m in latent.modalities]
    text = config.text
    lengths: Counter[int] = Counter()
    shards = [(rel, range(-start % every, end - start, every)) for rel, start, end in config.shard_paths()]
    total = sum(len(wanted) for _, wanted in shards)
    if total == 0:
        raise ConfigError(f"{root} holds no samples to take statistics of")
    advance = start_step(progress, "read", total)
    for (rel, wanted), (_, start, _) in zip(shards, config.shard_paths()):
        with reading(root / rel), h5py.File(root / rel, "r") as shard:
            dataset = shard[latent.dataset]
            for row in wanted:
                sample = dataset[row]  # one chunk: one sample in memory at a time
                for accumulator in accumulators:
                    accumulator.add(sample)
                if tokens is not None:
                    tokens.add(start + row, sample)
                advance(1)
            if text is not None:
                lengths.update(int(v) for v in shard[text.length_dataset][wanted.start :: every])
    return CacheStats(
        num_samples=config.num_samples, latent_dataset=latent.dataset, latent_shape=list(latent.shape),
        storage_dtype=config.latent_dtype, extreme=extreme, histogram_edges=HISTOGRAM_EDGES.tolist(),
        modalities=[a.result() for a in accumulators],
        text_lengths=dict(sorted(lengths.items())) if text is not None else None,
        max_length=text.max_length if text is not None else None, truncated_prompts=truncated,
        rejects_by_reason=dict(sorted(rejects.items())), samples_per_source=dict(sorted(sources.items())),
        rows_read=[0, every], tokens=None if tokens is None else tokens.result(sample_ids),
        conditioning=conditioning_stats(root, config, every),
        unknown_tokens=None if unknown is None else unknown.result(),
        audio=None if audio is None else audio.result())


def check_cosmos_tokenizer(config: CacheConfig, root: Path) -> None:
    """ConfigError unless the cache's latents live in the Wan2.1 VAE's space (16 channels, 4x8x8; haar-4x8x8 is its
    stand-in): Cosmos-Predict2 encodes with Wan2.1, so its mean/std files cannot describe another tokenizer's."""
    tokenizer = registry.resolve("tokenizer", str(config.tokenizer_name))
    geometry = (tokenizer.latent_channels, tokenizer.temporal_factor, tokenizer.spatial_factor)
    if geometry != COSMOS_GEOMETRY:
        raise ConfigError(
            f"--export-cosmos-mean-std: {root} was encoded by {tokenizer.name} ({geometry[0]} channels, "
            f"{geometry[1]}x{geometry[2]}x{geometry[2]}), but Cosmos-Predict2 uses the Wan2.1 VAE (16 channels, "
            "4x8x8), whose statistics its mean/std files hold; build the cache with --tokenizer wan2.1 (the "
            "cosmos-predict2-* presets) to train Cosmos-Predict2, or leave out --export-cosmos-mean-std"
        )


def export_cosmos_mean_std(stats: CacheStats, folder: Path, modality: str = "rgb",
                           frames: int = COSMOS_FRAMES) -> tuple[Path, Path]:
    """Write Cosmos-Predict2's `load_mean_std` files into `folder`: video_mean_std.pt and images_mean_std.pt.

    Each holds the tuple (mean, std) of float32 tensors that Cosmos' `_video_vae` reads with torch.load and
    reshapes to (1, 16, 32, 1, 1) and (1, 16, 1, 1, 1). Video frames 0..T'-1 are this cache's per-frame
    statistics; Cosmos' fixed reshape needs `frames` (32) of them, so frames T'.. repeat the statistics of
    frames 1.. together (never read for clips of T' latent frames: Cosmos slices [:, :, :T']). The image
    file holds latent frame 0's statistics: a causal tokenizer encodes one image exactly as a frame 0.
    Point Cosmos' `mean_std_path` at folder/mean_std.pt.
    """
    import torch

    chosen = stats.modality(modality)
    channels = chosen.channels[1] - chosen.channels[0]
    latent_frames = len(chosen.frame_mean[0])
    if channels != 16:
        raise ConfigError(f"modality {modality!r} has {channels} latent channels; Cosmos' mean/std files hold 16")
    if latent_frames > frames:
        raise ConfigError(f"the cache has {latent_frames} latent frames; Cosmos' video_mean_std holds {frames}")
    later_mean = chosen.later_frames_mean or chosen.first_frame_mean
    later_std = chosen.later_frames_std or chosen.first_frame_std
    mean = np.repeat(np.asarray(later_mean)[:, None], frames, axis=1)
    std = np.repeat(np.asarray(later_std)[:, None], frames, axis=1)
    mean[:, :latent_frames], std[:, :latent_frames] = chosen.frame_mean, chosen.frame_std
    folder = Path(folder)
    written = []
    for name, pair in (("video_mean_std.pt", (mean, std)),
                       ("images_mean_std.pt", (chosen.first_frame_mean, chosen.first_frame_std))):
        tensors = tuple(torch.tensor(np.asarray(a), dtype=torch.float32).reshape(1, 16, -1, 1, 1) for a in pair)
        with atomic_path(folder / name) as tmp:
            torch.save(tensors, tmp)
        written.append(folder / name)
    return written[0], written[1]
