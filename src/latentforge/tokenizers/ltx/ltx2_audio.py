"""The "ltx2-audio" audio tokenizer: LTX-2's audio VAE, diffusers' AutoencoderKLLTX2Audio, over the log-mel front end
of audio_mel.py.

The latent is what LTX-2 trains on: the posterior mean (diffusers' `latent_dist.mode()`, ltx-core's first half of
the encoder's channels) packed [B, C, L, M] -> [B, L, C*M] as LTX2Pipeline._pack_audio_latents does, normalised as
LTX2Pipeline._normalize_audio_latents does, (x - latents_mean) / latents_std over the C*M features (the VAE's own
buffers), and stored unpacked again as [C, L, M] (ltx-core's AudioEncoder output): a trainer packs it with
`latent.transpose(1, 2).flatten(2, 3)`.
"""

from __future__ import annotations

import json
from typing import Any

import diffusers
import torch

from ...config.raw_video_sections import AudioConfig
from ...devices import tf32_off
from ...errors import ConfigError
from ..audio_base import AudioTokenizer
from ..checkpoints import (
    CheckpointError,
    CheckpointSource,
    check_keys,
    check_sha256,
    checkpoint_sha256,
    read_weight_files,
    resolve_checkpoint,
)
from .audio_mel import MelSettings, log_mel

MODEL_CLASS = "AutoencoderKLLTX2Audio"
FAMILY = "LTX-2 audio"
ADVICE = (f"pass a diffusers folder with config.json and diffusion_pytorch_model.safetensors of {MODEL_CLASS}, or a "
          "pipeline folder holding one in audio_vae/ (the hub repo Lightricks/LTX-2 in diffusers format)")
SINGLE_FILE = "single-file"  # what a file path resolves to; refused: this tokenizer takes folders only
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
NORMALIZATION = ("posterior mean mu [C, L, M], packed to [L, C*M], (x - latents_mean) / latents_std per feature, "
                 "unpacked to [C, L, M] (LTX2Pipeline._pack_audio_latents, _normalize_audio_latents)")


class LTX2AudioTokenizer(AudioTokenizer):
    name = "ltx2-audio"
    precisions = {"fp32": 0.0, "bf16": 5e-2}

    def __init__(self, checkpoint: str, precision: str, sha256: str | None, device: torch.device | str) -> None:
        self.device = torch.device(device)
        self.precision = precision
        self._dtype = DTYPES[precision]
        self.source = _resolve(checkpoint)
        self.checkpoint_sha256 = checkpoint_sha256(self.source)
        check_sha256(self.source, self.checkpoint_sha256, sha256, "audio.sha256")  # before any weights are read
        model = _load_model(self.source)
        self.mel = mel_settings(model.config)
        self.latents_mean = model.latents_mean.float().clone().to(self.device)
        self.latents_std = model.latents_std.float().clone().to(self.device)
        self._vae = torch.nn.Module.to(model, self.device, self._dtype)

    # ------------------------------------------------------------------ settings and record

    @classmethod
    def check_settings(cls, audio: AudioConfig) -> None:
        if not audio.checkpoint:
            raise ConfigError(f"audio.checkpoint is required for audio.tokenizer={cls.name}; {ADVICE}")
        if audio.precision not in cls.precisions:
            raise ConfigError(f"audio.precision={audio.precision!r} is not allowed for {cls.name}; allowed: "
                              f"{', '.join(cls.precisions)}")

    @classmethod
    def checkpoint_digest(cls, checkpoint: str | None) -> str | None:
        return None if not checkpoint else checkpoint_sha256(_resolve(checkpoint))

    @classmethod
    def describe(cls, audio: AudioConfig, samples: int) -> tuple[tuple[int, ...], dict[str, Any]]:
        source = _resolve(audio.checkpoint or "")
        config = _checked_config(source, audio)
        with torch.device("meta"):
            model = getattr(diffusers, MODEL_CLASS).from_config(config)
        settings = mel_settings(model.config)
        mel = torch.empty(1, audio.channels, settings.frames(samples), settings.mel_bins, device="meta")
        with torch.no_grad():
            shape = tuple(model.encode(mel).latent_dist.mode().shape[1:])
        fingerprint = {
            "name": cls.name, "version": 1, "model_class": MODEL_CLASS,
            "checkpoint_sha256": checkpoint_sha256(source), "checkpoint_format": source.kind,
            "precision": audio.precision, "mel": settings.record(), "latent": NORMALIZATION,
            "architecture": json.loads(json.dumps({k: v for k, v in model.config.items() if not k.startswith("_")})),
            "diffusers_version": diffusers.__version__,
        }
        return shape, fingerprint

    @classmethod
    def from_config(cls, audio: AudioConfig, device: torch.device | str) -> LTX2AudioTokenizer:
        cls.check_settings(audio)
        _checked_config(_resolve(audio.checkpoint or ""), audio)
        return cls(audio.checkpoint or "", audio.precision, audio.sha256, device)

    # ------------------------------------------------------------------ encode

    def encode(self, pcm: torch.Tensor) -> torch.Tensor:
        if pcm.ndim != 3:
            raise ConfigError(f"{self.name} encodes [B, samples, channels] PCM; got shape {list(pcm.shape)}")
        with torch.inference_mode(), tf32_off():
            mel = log_mel(pcm.to(self.device, torch.float32).transpose(1, 2), self.mel)
            mu = self._vae.encode(mel.to(self._dtype)).latent_dist.mode().float()
            packed = mu.transpose(1, 2).flatten(2, 3)  # [B, C, L, M] -> [B, L, C*M]
            normalized = (packed - self.latents_mean) / self.latents_std
            return normalized.unflatten(2, (mu.shape[1], mu.shape[3])).transpose(1, 2).contiguous()


def mel_settings(config: Any) -> MelSettings:
    """The front end the VAE's config implies (its rate, hop and bins; the FFT size is LTX-2's 1024)."""
    return MelSettings(sample_rate=int(config.sample_rate), hop_length=int(config.mel_hop_length),
                       mel_bins=int(config.mel_bins))


def _resolve(checkpoint: str) -> CheckpointSource:
    source = resolve_checkpoint(checkpoint, ADVICE, SINGLE_FILE, subfolder="audio_vae")
    if source.kind == SINGLE_FILE:
        raise CheckpointError(f"audio checkpoint {source.path} is a single file; {ADVICE}")
    return source


def _checked_config(source: CheckpointSource, audio: AudioConfig | None = None) -> dict[str, Any]:
    """The folder's config, refused unless it is the LTX-2 audio VAE and (given `audio`) takes its PCM."""
    config = getattr(diffusers, MODEL_CLASS).load_config(source.path)
    path = source.path / "config.json"
    if config.get("_class_name") != MODEL_CLASS:
        raise CheckpointError(f"{path} is a {config.get('_class_name')} folder, not {MODEL_CLASS}; {ADVICE}")
    latent_bins = int(config.get("mel_bins") or 64) // 4  # the latent's mel axis: 2 of the 3 levels halve it
    if int(config.get("base_channels", 128)) != int(config.get("latent_channels", 8)) * latent_bins:
        raise CheckpointError(f"{path}: latents_mean has base_channels={config.get('base_channels')} features, but "
                              f"the packed latent has latent_channels x mel_bins/4 = "
                              f"{int(config.get('latent_channels', 8)) * latent_bins}; not an LTX-2 audio VAE")
    if audio is not None:
        if int(config.get("in_channels", 2)) != audio.channels:
            raise ConfigError(f"the audio VAE in {source.path} encodes {config.get('in_channels', 2)} channels; set "
                              f"audio.channels={config.get('in_channels', 2)}")
        if int(config.get("sample_rate", 16000)) != audio.sample_rate:
            raise ConfigError(f"the audio VAE in {source.path} works at {config.get('sample_rate', 16000)} Hz; set "
                              f"audio.sample_rate={config.get('sample_rate', 16000)}")
    return config


def _load_model(source: CheckpointSource) -> Any:
    """diffusers' class holding exactly the folder's tensors in float32, in eval mode."""
    config = _checked_config(source)
    with torch.device("meta"):
        model = getattr(diffusers, MODEL_CLASS).from_config(config)
    state = read_weight_files(source.weight_files)
    check_keys(source, state, model.state_dict(), str, FAMILY)
    model.load_state_dict({k: v.float() for k, v in state.items()}, strict=True, assign=True)
    model.use_slicing = False
    return model.eval().requires_grad_(False)
