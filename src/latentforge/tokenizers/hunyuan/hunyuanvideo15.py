"""The "hunyuanvideo1.5" tokenizer: HunyuanVideo 1.5's causal VAE, diffusers' AutoencoderKLHunyuanVideo15
(32 latent channels, 4x16x16), latent = posterior mean * 1.03682 (its config's scaling_factor)."""

from __future__ import annotations

from .scaled_latent import ScaledLatentTokenizer

ADVICE = (
    "pass a diffusers folder with config.json and diffusion_pytorch_model.safetensors of "
    "AutoencoderKLHunyuanVideo15, or a pipeline folder holding one in vae/ (e.g. the hub repo "
    "hunyuanvideo-community/HunyuanVideo-1.5-Diffusers-480p_t2v)"
)


class HunyuanVideo15Tokenizer(ScaledLatentTokenizer):
    name = "hunyuanvideo1.5"
    latent_family = "hunyuanvideo1.5"
    model_class = "AutoencoderKLHunyuanVideo15"
    family = "HunyuanVideo 1.5"
    checkpoint_advice = ADVICE
    latent_channels = 32
    temporal_factor = 4
    default_tile = (256, 192)
    spatial_factor = 16
    # its mid-block attention builds a [B, L, L] causal mask for a [B, 1, L, C] query, which only a batch of one
    # broadcasts: each clip is encoded and decoded alone, as diffusers' slicing does
    one_clip_per_call = True
