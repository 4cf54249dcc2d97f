"""Tiny random VAEs of the real HunyuanVideo, HunyuanVideo 1.5, LTX-Video and LTX-2 architectures (diffusers'
classes, narrow widths, one layer per block), saved as diffusers folders for the tokenizers to load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import diffusers
import torch
from diffusers import LTX2Pipeline, LTXPipeline

# tokenizer name -> (diffusers class name, narrow config of the released architecture, a clip shape (T, H, W))
TINY_VAES: dict[str, tuple[str, dict[str, Any], tuple[int, int, int]]] = {
    "hunyuanvideo": ("AutoencoderKLHunyuanVideo",
                     {"block_out_channels": (8, 8, 8, 8), "norm_num_groups": 4, "layers_per_block": 1},
                     (9, 16, 24)),
    # the encoder's last width must hold both halves of the 32-channel posterior
    "hunyuanvideo1.5": ("AutoencoderKLHunyuanVideo15",
                        {"block_out_channels": (8, 16, 32, 64, 64), "layers_per_block": 1}, (9, 32, 32)),
    # 0.9.1 and later: a timestep-conditioned decoder that injects noise in its first block
    "ltx-video": ("AutoencoderKLLTXVideo",
                  {"block_out_channels": (8, 8, 8, 8), "decoder_block_out_channels": (8, 8, 8, 8),
                   "layers_per_block": (1, 1, 1, 1, 1), "decoder_layers_per_block": (1, 1, 1, 1, 1),
                   "timestep_conditioning": True, "decoder_inject_noise": (True, False, False, False, False)},
                  (17, 32, 64)),
    "ltx2": ("AutoencoderKLLTX2Video",
             {"block_out_channels": (8, 16, 32, 64), "decoder_block_out_channels": (8, 16, 32),
              "layers_per_block": (1, 1, 1, 1, 1), "decoder_layers_per_block": (1, 1, 1, 1),
              # stated in the released config (diffusers' conversion writes them); derived, they would be 64 and 16
              "spatial_compression_ratio": 32, "temporal_compression_ratio": 8},
             (9, 64, 64)),
}


def tiny_vae(name: str, seed: int = 0, **overrides: Any) -> Any:
    """The tiny model of tokenizer `name` with random weights (and, for LTX, random latent statistics)."""
    class_name, config, _ = TINY_VAES[name]
    torch.manual_seed(seed)
    model = getattr(diffusers, class_name)(**{**config, **overrides}).eval()
    if hasattr(model, "latents_mean"):
        channels = model.latents_mean.shape[0]
        model.latents_mean.copy_(torch.randn(channels) * 0.3)
        model.latents_std.copy_(torch.rand(channels) + 0.5)
    return model


def save_tiny_vae(name: str, folder: Path, seed: int = 0, **overrides: Any) -> Path:
    """`folder` holding the tiny model as diffusers saves it (config.json + diffusion_pytorch_model.safetensors)."""
    tiny_vae(name, seed, **overrides).save_pretrained(folder)
    return folder


def random_clip(name: str, batch: int = 1, seed: int = 1) -> torch.Tensor:
    """[B,3,T,H,W] in [-1, 1] of the shape the tiny model of `name` encodes in the tests."""
    frames, height, width = TINY_VAES[name][2]
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(batch, 3, frames, height, width, generator=generator) * 2 - 1


def reference_encode(name: str, vae: Any, video: torch.Tensor) -> torch.Tensor:
    """The latent a pipeline makes: retrieve_latents(..., "argmax") then its normalisation."""
    mu = vae.encode(video).latent_dist.mode()
    if name.startswith("hunyuanvideo"):
        return mu * vae.config.scaling_factor
    pipeline = LTXPipeline if name == "ltx-video" else LTX2Pipeline
    return pipeline._normalize_latents(mu, vae.latents_mean, vae.latents_std, vae.config.scaling_factor)
