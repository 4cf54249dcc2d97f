"""The "hunyuanvideo1.5" tokenizer: HunyuanVideo 1.5's causal VAE, diffusers' AutoencoderKLHunyuanVideo15
(32 latent channels, 4x16x16), latent = posterior mean * 1.03682 (its config's scaling_factor).

The official checkpoint (tencent/HunyuanVideo-1.5 `vae/diffusion_pytorch_model.safetensors`) holds the official
module's key names, renamed to diffusers' by original_keys.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from ..checkpoints import CheckpointError
from .official_vae import OfficialVaeTokenizer
from .original_keys import is_original_layout, to_diffusers, to_original

ADVICE = (
    "pass the official vae/ folder of tencent/HunyuanVideo-1.5 (config.json and diffusion_pytorch_model.safetensors) "
    "or its safetensors file, a diffusers folder with config.json and diffusion_pytorch_model.safetensors of "
    "AutoencoderKLHunyuanVideo15, or a pipeline folder holding one in vae/ (e.g. the hub repo "
    "hunyuanvideo-community/HunyuanVideo-1.5-Diffusers-480p_t2v)"
)


class HunyuanVideo15Tokenizer(OfficialVaeTokenizer):
    name = "hunyuanvideo1.5"
    latent_family = "hunyuanvideo1.5"
    model_class = "AutoencoderKLHunyuanVideo15"
    official_class = "AutoencoderKLConv3D"
    official_weights = "diffusion_pytorch_model.safetensors"
    family = "HunyuanVideo 1.5"
    checkpoint_advice = ADVICE
    latent_channels = 32
    temporal_factor = 4
    default_tile = (256, 192)
    spatial_factor = 16
    # its mid-block attention builds a [B, L, L] causal mask for a [B, 1, L, C] query, which only a batch of one
    # broadcasts: each clip is encoded and decoded alone, as diffusers' slicing does
    one_clip_per_call = True

    @classmethod
    def official_keys(cls, state: dict[str, torch.Tensor],
                      path: Path) -> tuple[dict[str, torch.Tensor], Callable[[str], str]]:
        if not is_original_layout(state):
            return state, str
        renamed = {to_diffusers(k): v for k, v in state.items()}
        if len(renamed) != len(state):  # a key under both its official and its diffusers name
            twice = sorted(k for k in state if k != to_diffusers(k) and to_diffusers(k) in state)
            raise CheckpointError(f"tokenizer checkpoint {path} holds tensors under both their official and their "
                                  f"diffusers names: {', '.join(twice[:5])}; pass the official file unchanged")
        return renamed, to_original
