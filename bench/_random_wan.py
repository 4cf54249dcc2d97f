"""The Wan2.1 VAE architecture with random weights, for benches that need no real checkpoint."""

from __future__ import annotations

import torch


def random_wan_vae(seed: int = 0):
    """diffusers' AutoencoderKLWan (the Wan2.1 architecture) with random weights whose norm gammas and biases are
    spread out, so every layer's arithmetic matters."""
    from diffusers import AutoencoderKLWan

    torch.manual_seed(seed)
    vae = AutoencoderKLWan(base_dim=96, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
                           temperal_downsample=[False, True, True]).eval()
    with torch.no_grad():
        for name, param in vae.named_parameters():
            if name.endswith("gamma"):
                param.uniform_(0.5, 1.5)
            elif name.endswith("bias"):
                param.uniform_(-0.1, 0.1)
    return vae
