"""What a trainer was built for, checked against a cache before the first batch.

A cache silently mismatched with its trainer (another tokenizer, precision, geometry, text encoder) trains
for days on wrong inputs without any error; this module turns every such mismatch into one loud error.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ..errors import ConfigError
from .config_file import CacheConfig


class CacheMismatch(ConfigError):
    """The cache does not fit the trainer. `mismatches` holds (field, trainer expects, cache has)."""

    def __init__(self, root: str, mismatches: list[tuple[str, Any, Any]]):
        self.mismatches = mismatches
        lines = "; ".join(f"{field}: trainer expects {want!r}, cache has {have!r}" for field, want, have in mismatches)
        super().__init__(
            f"cache {root} does not fit this trainer: {lines}. Point the trainer at a cache built for it, "
            "or rebuild the cache with the trainer's settings"
        )


@dataclass(frozen=True)
class CacheExpectation:
    """Every field left at None is not checked."""

    tokenizer_family: str | None = None  # "wan2.1"; a "wan2.2" cache never feeds a wan2.1 trainer
    tokenizer_sha256: str | None = None  # checkpoint SHA-256 the tokenizer was loaded from
    precision: str | None = None  # fp32 | bf16 | cosmos-bf16
    num_frames: int | None = None  # pixel frames per clip
    height: int | None = None
    width: int | None = None
    fps: str | None = None  # "source" or the target rate the frames were resampled to, e.g. "16"
    modalities: tuple[str, ...] | None = None  # the modalities the dataset returns, in channel order
    latent_shape: tuple[int, ...] | None = None  # [C, T', H', W'] of the returned latent
    normalization: str | None = None  # how latents were normalised ("tokenizer": (mu - mean_c) / std_c)
    storage_dtype: str | None = None
    text_encoder: str | None = None  # t5 | umt5 | none
    text_dim: int | None = None
    text_max_length: int | None = None
    vocabulary: int | None = None  # token caches: ids are in [0, vocabulary); a float-latent cache has none (0)
    token_grid: tuple[int, ...] | None = None  # token caches: [T', H', W'] of one modality's ids; latents: ()
    # conditioning streams the trainer reads, e.g. ("image_cond_latent", "clip_image_embeds"): the cache must hold
    # every one (it may hold more)
    conditioning: tuple[str, ...] | None = None
    image_latent: str | None = None  # wan-i2v | first-frame | none: how the cache's image condition was built

    @classmethod
    def coerce(cls, value: "CacheExpectation | dict[str, Any] | None") -> "CacheExpectation":
        """Accept the dataclass or a dict with its field names; refuse unknown keys with the allowed ones."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if not isinstance(value, dict):
            raise ConfigError(f"expect= must be a CacheExpectation or a dict, got {type(value).__name__}")
        allowed = [f.name for f in dataclasses.fields(cls)]
        unknown = [key for key in value if key not in allowed]
        if unknown:
            raise ConfigError(f"unknown expect= key {unknown[0]!r}; allowed keys: {', '.join(allowed)}")
        data = dict(value)
        for key in ("modalities", "latent_shape", "token_grid", "conditioning"):
            if data.get(key) is not None:
                data[key] = tuple(data[key])
        return cls(**data)

    @classmethod
    def of_cache(cls, config: CacheConfig, modalities: Sequence[str] | None = None) -> "CacheExpectation":
        """The expectation a cache meets exactly: save it with a checkpoint, check it again on resume."""
        return cls(**_found(config, tuple(modalities) if modalities else config.modality_names))

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}


def _found(config: CacheConfig, modalities: tuple[str, ...]) -> dict[str, Any]:
    channels = sum(config.modality(name).channels[1] - config.modality(name).channels[0] for name in modalities)
    text = config.text
    return {
        "tokenizer_family": config.tokenizer_family,
        "tokenizer_sha256": config.checkpoint_sha256,
        "precision": config.tokenizer.get("precision"),
        "num_frames": config.frames.get("num_frames"),
        "height": config.frames.get("height"),
        "width": config.frames.get("width"),
        "fps": config.fps,
        "modalities": modalities,
        "latent_shape": (channels, *config.latent.shape[1:]),
        "normalization": config.latent.normalization,
        "storage_dtype": config.storage_dtype,
        "text_encoder": "none" if text is None else text.name,
        "text_dim": None if text is None else text.dim,
        "text_max_length": None if text is None else text.max_length,
        "vocabulary": 0 if config.tokens is None else config.tokens.vocabulary,
        "token_grid": () if config.tokens is None else config.tokens.grid,
        "conditioning": () if config.conditioning is None else config.conditioning.names,
        "image_latent": "none" if config.conditioning is None else config.conditioning.image_latent,
    }


def _same(field: str, want: Any, have: Any) -> bool:
    if field == "fps" and want != "source" and have not in (None, "source"):
        try:
            return float(want) == float(have)
        except (TypeError, ValueError):
            return False
    if field == "conditioning":  # the streams the trainer reads, among those stored
        return set(want) <= set(have)
    if field == "tokenizer_sha256" and isinstance(want, str) and isinstance(have, str):
        return want.lower() == have.lower()
    return want == have


def check_expectation(root: Path, config: CacheConfig, modalities: tuple[str, ...], expect: CacheExpectation
                      ) -> None:
    """Raise CacheMismatch naming every field where the cache differs from what the trainer expects."""
    found = _found(config, modalities)
    mismatches = []
    for field in dataclasses.fields(expect):
        want = getattr(expect, field.name)
        if want is not None and not _same(field.name, want, found[field.name]):
            mismatches.append((field.name, want, found[field.name]))
    if mismatches:
        raise CacheMismatch(str(root), mismatches)
