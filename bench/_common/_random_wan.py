"""The Wan VAE architectures with random weights, for benches that need no real checkpoint."""

from __future__ import annotations

import torch


def spread_norms_and_biases(vae) -> None:
    """Norm gammas U[0.5, 1.5] and biases U[-0.1, 0.1], so every layer's arithmetic matters (defaults of 1 and 0
    would hide a swapped parameter); cost does not depend on weight values."""
    with torch.no_grad():
        for name, param in vae.named_parameters():
            if name.endswith("gamma"):
                param.uniform_(0.5, 1.5)
            elif name.endswith("bias"):
                param.uniform_(-0.1, 0.1)


def random_wan_vae(seed: int = 0, base_dim: int = 96):
    """diffusers' AutoencoderKLWan in the Wan2.1 architecture with random weights, gammas and biases spread out.
    base_dim 96 is the released width; `--tiny` runs take a narrow one (the loader reads the width from the
    weights), since bf16 convolutions on a CPU without bf16 instructions run ~55x slower than fp32."""
    from diffusers import AutoencoderKLWan

    torch.manual_seed(seed)
    vae = AutoencoderKLWan(base_dim=base_dim, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
                           temperal_downsample=[False, True, True]).eval()
    spread_norms_and_biases(vae)
    return vae
