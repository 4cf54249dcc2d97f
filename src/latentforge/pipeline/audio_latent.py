"""Each window's audio latent (audio.tokenizer, docs/audio.md): the registered audio tokenizer run over the unit's
stored PCM, its stream declared for cache_config.json with the tokenizer's fingerprint as its producer."""

from __future__ import annotations

import numpy as np
import torch

from .. import registry
from ..cache.audio_section import AUDIO_LATENT
from ..cache.conditioning_streams import ConditioningStream
from ..config import BuildConfig
from ..tokenizers.audio_base import AudioTokenizer

LATENT_DTYPE = "float32"  # stored as computed, whatever output.storage_dtype says


def audio_latent_stream(config: BuildConfig, samples: int) -> ConditioningStream | None:
    """The stored latent of PCM of `samples` samples; None without audio.tokenizer. Reads no weights."""
    audio = config.audio
    if audio.tokenizer == "none":
        return None
    shape, fingerprint = registry.resolve("audio_tokenizer", audio.tokenizer).describe(audio, samples)
    return ConditioningStream(AUDIO_LATENT, shape, LATENT_DTYPE, fingerprint)


def load_audio_tokenizer(config: BuildConfig, device: torch.device | str) -> AudioTokenizer | None:
    audio = config.audio
    if audio.tokenizer == "none":
        return None
    return registry.resolve("audio_tokenizer", audio.tokenizer).from_config(audio, device)


def audio_checkpoint_digest(config: BuildConfig) -> str | None:
    """The audio tokenizer's weights' SHA-256 (what resume keys on); None without one."""
    audio = config.audio
    if audio.tokenizer == "none":
        return None
    return registry.resolve("audio_tokenizer", audio.tokenizer).checkpoint_digest(audio.checkpoint)


def encode_audio_rows(tokenizer: AudioTokenizer, pcm: np.ndarray) -> np.ndarray:
    """[N, samples, channels] PCM -> [N, *latent] float32. Each window is encoded alone, so its latent never depends
    on which windows shared its unit (a deep verify re-encodes spot rows in other company)."""
    parts = [tokenizer.encode(torch.from_numpy(np.ascontiguousarray(pcm[i: i + 1]))).cpu().numpy()
             for i in range(len(pcm))]
    return np.concatenate(parts).astype(LATENT_DTYPE, copy=False)
