"""The interface of an audio tokenizer (audio.tokenizer, docs/audio.md): each window's stored PCM -> a latent stored
beside it. Registered by name under the kind "audio_tokenizer"; the build and deep verify know only this."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import torch

from ..config.raw_video_sections import AudioConfig


class AudioTokenizer(ABC):
    name: ClassVar[str]
    # precision -> deep verify's tolerance: the largest difference from a re-encode, relative to the largest value
    precisions: ClassVar[dict[str, float]]

    @classmethod
    @abstractmethod
    def check_settings(cls, audio: AudioConfig) -> None:
        """ConfigError for settings this tokenizer cannot take, without reading any weights."""

    @classmethod
    @abstractmethod
    def checkpoint_digest(cls, checkpoint: str | None) -> str | None:
        """The SHA-256 of the weights (what resume keys on and the fingerprint records)."""

    @classmethod
    @abstractmethod
    def describe(cls, audio: AudioConfig, samples: int) -> tuple[tuple[int, ...], dict[str, Any]]:
        """(one row's latent shape for PCM of `samples` samples, the fingerprint) from the checkpoint's config and
        hash alone, without reading weights: what cache_config.json records."""

    @classmethod
    @abstractmethod
    def from_config(cls, audio: AudioConfig, device: torch.device | str) -> AudioTokenizer:
        """The tokenizer with its weights on `device`, the SHA-256 checked before they are read."""

    @abstractmethod
    def encode(self, pcm: torch.Tensor) -> torch.Tensor:
        """[B, samples, channels] float32 PCM -> [B, *shape] float32 latents (on the tokenizer's device)."""
