"""The "hunyuanvideo" tokenizer: HunyuanVideo's (1.0) causal VAE, diffusers' AutoencoderKLHunyuanVideo
(16 latent channels, 4x8x8), latent = posterior mean * 0.476986 (its config's scaling_factor)."""

from __future__ import annotations

from .scaled_latent import ScaledLatentTokenizer

ADVICE = (
    "pass a diffusers folder with config.json and diffusion_pytorch_model.safetensors of AutoencoderKLHunyuanVideo, "
    "or a pipeline folder holding one in vae/ (the hub repo hunyuanvideo-community/HunyuanVideo)"
)


class HunyuanVideoTokenizer(ScaledLatentTokenizer):
    name = "hunyuanvideo"
    latent_family = "hunyuanvideo"
    model_class = "AutoencoderKLHunyuanVideo"
    family = "HunyuanVideo"
    checkpoint_advice = ADVICE
    latent_channels = 16
    temporal_factor = 4
    default_tile = (256, 192)
    spatial_factor = 8
