"""A tiny random LTX-2 audio VAE of the real architecture, saved as a pipeline folder's audio_vae/ (no download)."""

from __future__ import annotations

from pathlib import Path

import torch
from diffusers import AutoencoderKLLTX2Audio

MEL_BINS = 16  # latent: 4 channels x 4 mel bins = base_channels 16, the features latents_mean/std normalise


def tiny_audio_vae(folder: Path, channels: int = 2) -> Path:
    """3 levels (x4 in time and mel) at toy width, with non-trivial latents_mean / latents_std; returns `folder`."""
    torch.manual_seed(0)
    model = AutoencoderKLLTX2Audio(base_channels=16, output_channels=channels, ch_mult=(1, 2, 4), num_res_blocks=1,
                                   in_channels=channels, latent_channels=4, mel_bins=MEL_BINS, resolution=32)
    with torch.no_grad():
        model.latents_mean.copy_(torch.randn(16) * 0.1)
        model.latents_std.copy_(torch.rand(16) + 0.5)
    model.save_pretrained(folder / "audio_vae")
    return folder
