"""What the LTX-Video and LTX-2 tokenizers share: the latent is the posterior mean normalised per channel by the
VAE's own `latents_mean` / `latents_std` buffers (stored with its weights) and the config's `scaling_factor`,
exactly diffusers' LTX pipelines' `_normalize_latents`; decoding inverts it as their `_denormalize_latents` and
runs a timestep-conditioned decoder at decode timestep 0 without added noise (the pipelines' defaults)."""

from __future__ import annotations

from typing import Any

import torch

from ..diffusers_vae import DiffusersVaeTokenizer

REQUIRED_CONFIG = {"in_channels": 3, "out_channels": 3, "encoder_causal": True}
DECODE_TIMESTEP = 0.0  # diffusers' LTX pipelines' default decode_timestep (and so decode_noise_scale)
DECODER_NOISE_GENERATOR_STATE = 0  # a decoder that injects noise draws it from this fixed random stream


class ChannelStatsTokenizer(DiffusersVaeTokenizer):
    """z = (mu - latents_mean) * scaling_factor / latents_std per channel, in float32."""

    required_config = REQUIRED_CONFIG
    scaling_factor: float
    latents_mean: torch.Tensor  # [1, C, 1, 1, 1] float32 on the device
    latents_std: torch.Tensor
    timestep_conditioning: bool  # the decoder takes a timestep (LTX-Video 0.9.1 and later)
    injects_noise: bool  # some decoder block adds random noise

    def read_constants(self, model: Any) -> None:
        self.scaling_factor = float(model.config.scaling_factor)
        self.latents_mean = model.latents_mean.float().clone().view(1, -1, 1, 1, 1).to(self.device)
        self.latents_std = model.latents_std.float().clone().view(1, -1, 1, 1, 1).to(self.device)
        self.timestep_conditioning = bool(model.config.timestep_conditioning)
        self.injects_noise = any(_as_tuple(model.config.decoder_inject_noise))

    def normalize(self, mu: torch.Tensor) -> torch.Tensor:
        return (mu - self.latents_mean) * self.scaling_factor / self.latents_std

    def denormalize(self, latent: torch.Tensor) -> torch.Tensor:
        return latent * self.latents_std / self.scaling_factor + self.latents_mean

    def decode_model(self, z: torch.Tensor) -> torch.Tensor:
        timestep = None
        if self.timestep_conditioning:
            timestep = torch.tensor([DECODE_TIMESTEP] * z.shape[0], device=z.device, dtype=z.dtype)
        if not self.injects_noise:
            return self._vae.decode(z, timestep).sample
        devices = [self.device] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):  # the caller's random state is left as it was
            torch.manual_seed(DECODER_NOISE_GENERATOR_STATE)
            return self._vae.decode(z, timestep).sample

    def normalization(self) -> dict[str, Any]:
        return {
            "latent": "posterior mean mu, (mu - latents_mean) * scaling_factor / latents_std per channel",
            "scaling_factor": self.scaling_factor,
            "latents_mean": self.latents_mean.flatten().tolist(),
            "latents_std": self.latents_std.flatten().tolist(),
            "decode_timestep": DECODE_TIMESTEP if self.timestep_conditioning else None,
        }


def _as_tuple(value: bool | list | tuple) -> tuple:
    return tuple(value) if isinstance(value, (list, tuple)) else (value,)
