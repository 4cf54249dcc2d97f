"""cache_config.json: everything a reader needs to use a cache and check it fits its trainer (docs/cache-format.md).

Nothing here may depend on time, host, output path, worker count or executor: the file is checksummed and
must be byte-identical across reruns.
"""

from __future__ import annotations

from typing import Any

from . import __version__
from .config import BuildConfig
from .text.source import BuildTextRecord, pickle_lookup_rule, uses_pickles

PIXEL_RANGE = "uint8 v -> v/127.5 - 1 (256-entry table)"


def modality_entries(config: BuildConfig, latent_channels: int) -> list[dict[str, Any]]:
    """Channel range and role of each modality; RGB latent frame 0 conditions, everything is a target."""
    entries = []
    for i, name in enumerate(config.modalities.names):
        role = "conditioning+target" if name == "rgb" else "target"
        entries.append({"name": name, "channels": [i * latent_channels, (i + 1) * latent_channels], "role": role})
    return entries


def text_entry(config: BuildConfig, text: BuildTextRecord) -> dict[str, Any]:
    """The text section: datasets and width, where rows come from, then the encoder's fingerprint (if any)."""
    entry: dict[str, Any] = {
        "name": config.text.name,
        "embeddings_dataset": text.embeddings_dataset,
        "length_dataset": text.length_dataset,
        "dim": text.dim,
        "max_length": config.text.max_length,
        "empty_prompt": config.text.empty_prompt,
        "source": config.text.source,
    }
    if uses_pickles(config.text):
        entry["pickles"] = {"format": "cosmos-t5-pickle", "lookup": pickle_lookup_rule(config)}
    entry.update({k: v for k, v in text.fingerprint.items() if k not in ("name", "max_length", "dim")})
    return entry


def make_cache_config(
    config: BuildConfig,
    latent_shape: tuple[int, ...],
    tokenizer_fingerprint: dict[str, Any],
    text: BuildTextRecord | None,
    latent_channels: int,
) -> dict[str, Any]:
    """The cache_config.json object with num_samples/num_shards left at 0 (commit fills them in)."""
    frames = dict(vars(config.frames))
    frames["pixel_range"] = PIXEL_RANGE
    dataset = {k: v for k, v in vars(config.dataset).items() if k not in ("path", "limit")}
    return {
        "format": "latentforge-cache",
        "format_version": 1,
        "latentforge_version": __version__,
        "preset": config.preset,
        "num_samples": 0,
        "num_shards": 0,
        "rows_per_shard": config.output.rows_per_shard,
        "storage_dtype": config.output.storage_dtype,
        "latent": {
            "dataset": config.output.latent_dataset,
            "shape": list(latent_shape),
            "modalities": modality_entries(config, latent_channels),
            "conditioning": {"modality": "rgb", "latent_frames": [0, 1]},
            "normalization": "tokenizer",
        },
        "tokenizer": tokenizer_fingerprint,
        "text": None if text is None else text_entry(config, text),
        "frames": frames,
        "modalities": {
            "names": list(config.modalities.names),
            "mask": vars(config.modalities.mask) if "mask" in config.modalities.names else None,
            "depth": vars(config.modalities.depth) if "depth" in config.modalities.names else None,
        },
        "dataset": dataset,
        "build": {
            "unit_size": config.output.unit_size,
            "batch_size": config.output.batch_size,
            "seed": config.run.seed,
        },
    }
