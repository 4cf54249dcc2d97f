"""The "ltx2" tokenizer: LTX-2's causal video VAE, diffusers' AutoencoderKLLTX2Video (128 latent channels,
8x32x32), latents normalised per channel by the VAE's own statistics (channel_stats.py)."""

from __future__ import annotations

from .channel_stats import ChannelStatsTokenizer

ADVICE = (
    "pass a diffusers folder with config.json and diffusion_pytorch_model.safetensors of AutoencoderKLLTX2Video, or "
    "a pipeline folder holding one in vae/ (the hub repo Lightricks/LTX-2 in diffusers format)"
)


class LTX2Tokenizer(ChannelStatsTokenizer):
    name = "ltx2"
    latent_family = "ltx2"
    model_class = "AutoencoderKLLTX2Video"
    family = "LTX-2"
    checkpoint_advice = ADVICE
    latent_channels = 128
    temporal_factor = 8
    default_tile = (512, 448)
    spatial_factor = 32
