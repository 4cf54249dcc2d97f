"""The "ltx-video" tokenizer: LTX-Video 0.9.x's causal VAE, diffusers' AutoencoderKLLTXVideo (128 latent
channels, 8x32x32), latents normalised per channel by the VAE's own statistics (channel_stats.py)."""

from __future__ import annotations

from .channel_stats import ChannelStatsTokenizer

ADVICE = (
    "pass a diffusers folder with config.json and diffusion_pytorch_model.safetensors of AutoencoderKLLTXVideo, or "
    "a pipeline folder holding one in vae/ (the hub repo Lightricks/LTX-Video, or Lightricks/LTX-Video-0.9.5 and "
    "later 0.9.x releases in diffusers format)"
)


class LTXVideoTokenizer(ChannelStatsTokenizer):
    name = "ltx-video"
    latent_family = "ltx-video"
    model_class = "AutoencoderKLLTXVideo"
    family = "LTX-Video"
    checkpoint_advice = ADVICE
    latent_channels = 128
    temporal_factor = 8
    default_tile = (512, 448)
    spatial_factor = 32
