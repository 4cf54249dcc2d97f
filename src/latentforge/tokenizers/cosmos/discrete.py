"""The discrete Cosmos video tokenizers (DV): FSQ with levels (8, 8, 8, 5, 5, 5), a 64,000-token vocabulary.

`encode` returns the 6 FSQ code channels as float32 in [-1, 1] (multiples of 1/4 and 1/2, exact in float16), so
a latent cache of them holds the tokens losslessly; `encode_ids` / `decode_ids` give and take the token ids
[B, T', H', W'], the numbers the reference's encoder returns first.
"""

from __future__ import annotations

import torch

from ...errors import ConfigError
from .tokenizer import CosmosTokenizer


class CosmosDiscreteTokenizer(CosmosTokenizer):
    family = "DV"
    latent_channels = 6
    # A re-encode elsewhere moves a token where its code lands within rounding error of a level boundary; each
    # such flip moves one channel by one level step (0.25 or 0.5), a relative L2 of ~1/(2 sqrt(6 N)) over N
    # positions: these allow a few per thousand (fp32) and more for bf16, which rounds every layer.
    precisions = {"fp32": 1e-2, "bf16": 5e-2}
    latent_description = "FSQ codes in [-1, 1], 6 channels; token id = sum_c (code_c * h_c + h_c) * basis_c"

    @property
    def vocabulary(self) -> int:
        return self._model.quantizer.vocabulary

    def encode(self, video: torch.Tensor) -> torch.Tensor:
        codes, _ = self._model.quantizer(self._encode_raw(video))
        return codes.float()

    def encode_ids(self, video: torch.Tensor) -> torch.Tensor:
        """[B,3,T,H,W] in [-1,1] -> token ids [B,T',H',W'] int64 in [0, 64000)."""
        _, ids = self._model.quantizer(self._encode_raw(video))
        return ids.long()

    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        if latent.ndim != 5 or latent.shape[1] != self.latent_channels:
            raise ConfigError(f"{self.name} decodes [B,{self.latent_channels},T',H',W'] FSQ codes; got shape "
                              f"{list(latent.shape)}")
        return self._decode_raw(latent)

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
