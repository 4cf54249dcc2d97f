"""A Cosmos video autoencoder as one module with the reference's top-level names: `encoder`, `quant_conv`,
`post_quant_conv`, `decoder` (and for DV the weightless `quantizer`). Its state dict is the reference's, so the
weights of `autoencoder.jit`, or of `encoder.jit` and `decoder.jit` together, load into it unchanged."""

from __future__ import annotations

import torch
from torch import nn

from .architecture import CosmosArchitecture
from .decoder import CosmosDecoder
from .encoder import CosmosEncoder
from .layers import pointwise
from .quantizer import FSQuantizer


class CosmosVideoAutoencoder(nn.Module):
    def __init__(self, arch: CosmosArchitecture):
        super().__init__()
        self.arch = arch
        self.encoder = CosmosEncoder(arch)
        self.decoder = CosmosDecoder(arch)
        self.quant_conv = pointwise(arch.z_channels, arch.latent_channels)
        self.post_quant_conv = pointwise(arch.latent_channels, arch.z_channels)
        self.quantizer = FSQuantizer(arch.levels) if arch.discrete else None

    def encode(self, video: torch.Tensor) -> torch.Tensor:
        """CV: the latent [B, 16, T', H', W'] (the AE formulation: no sampling). DV: the pre-quantisation
        [B, 6, T', H', W'], which `quantizer` turns into codes and ids."""
        return self.quant_conv(self.encoder(video))

    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        """CV latent, or DV codes in [-1, 1] -> pixels [B, 3, T, H, W] (not clamped, as the reference)."""
        return self.decoder(self.post_quant_conv(latent))

    def forward(self, video: torch.Tensor) -> torch.Tensor:
        """encode then decode (what `autoencoder.jit` computes); lets a test trace the whole module."""
        latent = self.encode(video)
        if self.quantizer is not None:
            latent = self.quantizer(latent)[0].to(latent.dtype)
        return self.decode(latent)
