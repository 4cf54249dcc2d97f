"""A tiny random LTX-2 audio VAE of the real architecture, saved as a pipeline folder's audio_vae/ (no download)."""

from __future__ import annotations

from pathlib import Path

import torch
from diffusers import AutoencoderKLLTX2Audio

MEL_BINS = 16  # latent: 4 channels x 4 mel bins = base_channels 16, the features latents_mean/std normalise


def tiny_audio_vae(folder: Path, channels: int = 2, ltx2_latent: bool = False) -> Path:
    """3 levels (x4 in time and mel) at toy width, with non-trivial latents_mean / latents_std; returns `folder`.
    `ltx2_latent`: LTX-2's latent of 8 channels x 16 mel bins (64 mel bins in, 128 features), what its DiT takes."""
    torch.manual_seed(0)
    width, latent_channels, mel_bins, mult = (128, 8, 64, (1, 1, 1)) if ltx2_latent else (16, 4, MEL_BINS, (1, 2, 4))
    model = AutoencoderKLLTX2Audio(base_channels=width, output_channels=channels, ch_mult=mult, num_res_blocks=1,
                                   in_channels=channels, latent_channels=latent_channels, mel_bins=mel_bins,
                                   resolution=32)
    with torch.no_grad():
        model.latents_mean.copy_(torch.randn(width) * 0.1)
        model.latents_std.copy_(torch.rand(width) + 0.5)
    model.save_pretrained(folder / "audio_vae")
    return folder
