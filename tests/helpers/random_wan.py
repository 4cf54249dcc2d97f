"""diffusers' AutoencoderKLWan (Wan2.1 or Wan2.2 configuration) with random weights, saved as a diffusers folder
the tokenizers load through their own loading code."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from diffusers import AutoencoderKLWan


def random_wan_vae(config: dict, seed: int = 0) -> AutoencoderKLWan:
    """Random weights with gammas U[0.5, 1.5] and biases U[-0.1, 0.1] (as bench/_common/_random_wan.py): defaults of
    1 and 0 would hide a swapped parameter."""
    from diffusers import AutoencoderKLWan  # here, not at import: diffusers takes seconds to import

    torch.manual_seed(seed)
    vae = AutoencoderKLWan.from_config(config).eval()
    with torch.no_grad():
        for name, param in vae.named_parameters():
            if name.endswith("gamma"):
                param.uniform_(0.5, 1.5)
            elif name.endswith("bias"):
                param.uniform_(-0.1, 0.1)
    return vae


def save_random_wan_vae(folder: Path, config: dict, seed: int = 0) -> tuple[AutoencoderKLWan, Path]:
    vae = random_wan_vae(config, seed)
    vae.save_pretrained(folder)
    return vae, Path(folder)
