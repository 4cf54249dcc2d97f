"""The "hunyuanvideo" tokenizer: HunyuanVideo's (1.0) causal VAE, diffusers' AutoencoderKLHunyuanVideo
(16 latent channels, 4x8x8), latent = posterior mean * 0.476986 (its config's scaling_factor).

The official checkpoint (`hunyuan-video-t2v-720p/vae/pytorch_model.pt`) holds diffusers' key names already:
diffusers' conversion script loads it with an empty rename map, strictly, so its keys are kept as they are."""

from __future__ import annotations

from .official_vae import OfficialVaeTokenizer

ADVICE = (
    "pass the official vae/ folder (config.json and pytorch_model.pt of hunyuan-video-t2v-720p) or its "
    "pytorch_model.pt, a diffusers folder with config.json and diffusion_pytorch_model.safetensors of "
    "AutoencoderKLHunyuanVideo, or a pipeline folder holding one in vae/ (the hub repo "
    "hunyuanvideo-community/HunyuanVideo)"
)


class HunyuanVideoTokenizer(OfficialVaeTokenizer):
    name = "hunyuanvideo"
    latent_family = "hunyuanvideo"
    model_class = "AutoencoderKLHunyuanVideo"
    official_class = "AutoencoderKLCausal3D"
    official_weights = "pytorch_model.pt"
    family = "HunyuanVideo"
    checkpoint_advice = ADVICE
    latent_channels = 16
    temporal_factor = 4
    default_tile = (256, 192)
    spatial_factor = 8
