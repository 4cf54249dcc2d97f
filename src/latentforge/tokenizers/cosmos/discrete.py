"""The discrete Cosmos video tokenizers (DV): FSQ with levels (8, 8, 8, 5, 5, 5), a 64,000-token vocabulary.

A cache stores token ids, not codes: `encode` returns the ids as one stream [B, 1, T', H', W'] int64 (the
pipeline stacks one stream per modality) and `decode` takes them back; `encode_ids` / `decode_ids` give and take
the ids [B, T', H', W'], the numbers the reference's encoder returns first.
"""

from __future__ import annotations

import math

import torch

from ...errors import ConfigError
from .architecture import DV_LEVELS
from .tokenizer import CosmosTokenizer


class CosmosDiscreteTokenizer(CosmosTokenizer):
    family = "DV"
    output = "tokens"
    latent_channels = 1  # one id stream per modality
    vocabulary = math.prod(DV_LEVELS)  # 64,000
    # The fraction of ids a re-encode elsewhere may change (docs/verify.md): a token flips where its code lands
    # within rounding error of a level boundary; a few per thousand in fp32, more in bf16, which rounds every layer.
    precisions = {"fp32": 1e-2, "bf16": 5e-2}
    latent_description = "token ids in [0, 64000): id = sum_c (code_c * h_c + h_c) * basis_c of the FSQ codes"

    def encode(self, video: torch.Tensor) -> torch.Tensor:
        return self.encode_ids(video).unsqueeze(1)

    def encode_ids(self, video: torch.Tensor) -> torch.Tensor:
        """[B,3,T,H,W] in [-1,1] -> token ids [B,T',H',W'] int64 in [0, 64000)."""
        _, ids = self._model.quantizer(self._encode_raw(video))
        return ids.long()

    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        """Token ids [B,1,T',H',W'] (what encode returns) -> pixels [B,3,T,H,W] in [-1,1]."""
        if latent.ndim != 5 or latent.shape[1] != 1:
            raise ConfigError(f"{self.name} decodes token ids [B,1,T',H',W']; got shape {list(latent.shape)}")
        return self.decode_ids(latent[:, 0].long())

    def decode_ids(self, ids: torch.Tensor) -> torch.Tensor:
        """Token ids [B,T',H',W'] -> pixels [B,3,T,H,W] in [-1,1]."""
        if ids.ndim != 4 or ids.dtype.is_floating_point or int(ids.min()) < 0 or int(ids.max()) >= self.vocabulary:
            raise ConfigError(f"{self.name} decodes integer token ids [B,T',H',W'] in [0, {self.vocabulary}); got "
                              f"{ids.dtype} of shape {list(ids.shape)}")
        return self._decode_raw(self._model.quantizer.ids_to_codes(ids.to(self.device)))


class CosmosDV4x8x8(CosmosDiscreteTokenizer):
    name = "cosmos-dv4x8x8"
    temporal_factor, spatial_factor = 4, 8


class CosmosDV8x8x8(CosmosDiscreteTokenizer):
    name = "cosmos-dv8x8x8"
    temporal_factor, spatial_factor = 8, 8


class CosmosDV8x16x16(CosmosDiscreteTokenizer):
    name = "cosmos-dv8x16x16"
    temporal_factor, spatial_factor = 8, 16
