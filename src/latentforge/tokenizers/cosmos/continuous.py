"""The continuous Cosmos video tokenizers (CV): 16 latent channels, the encoder's output as it is (the AE
formulation: no sampling, no normalisation, as `CausalVideoTokenizer.encode` returns it)."""

from __future__ import annotations

import torch

from ...errors import ConfigError
from .tokenizer import CosmosTokenizer


class CosmosContinuousTokenizer(CosmosTokenizer):
    family = "CV"
    latent_channels = 16
    # fp32: TF32 off, so another device differs by summation order only; bf16: every layer rounds to bf16
    precisions = {"fp32": 1e-5, "bf16": 2e-2}
    latent_description = "quant_conv output (AE formulation), not normalised"

    def encode(self, video: torch.Tensor) -> torch.Tensor:
        return self._encode_raw(video).float()

    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        if latent.ndim != 5 or latent.shape[1] != self.latent_channels:
            raise ConfigError(f"{self.name} decodes [B,{self.latent_channels},T',H',W'] latents; got shape "
                              f"{list(latent.shape)}")
        return self._decode_raw(latent)


class CosmosCV4x8x8(CosmosContinuousTokenizer):
    name = "cosmos-cv4x8x8"
    temporal_factor, spatial_factor = 4, 8


class CosmosCV8x8x8(CosmosContinuousTokenizer):
    name = "cosmos-cv8x8x8"
    temporal_factor, spatial_factor = 8, 8


class CosmosCV8x16x16(CosmosContinuousTokenizer):
    name = "cosmos-cv8x16x16"
    temporal_factor, spatial_factor = 8, 16
