"""Finite scalar quantisation (FSQ) as the Cosmos DV tokenizers run it: each of the code channels is bounded by a
shifted tanh to its level count, rounded (half to even) and rescaled to [-1, 1]; the token id is the mixed-radix
number of the rounded levels (first channel least significant). No weights.

The bound's constants are built by the reference's tensor expressions (int32 levels, float32 arithmetic), and
the bound itself runs in float32 whatever the model's dtype (the reference's type promotion), so ids and codes
are the reference's.
"""

from __future__ import annotations

import math

import torch
from torch import nn

_BOUND_EPS = 1e-3


class FSQuantizer(nn.Module):
    def __init__(self, levels: tuple[int, ...]):
        super().__init__()
        # made on the CPU even under a meta-device context: a model built on meta then loaded with assign=True
        # keeps these (they are in no checkpoint)
        self.register_buffer("_levels", torch.tensor(levels, dtype=torch.int32, device="cpu"), persistent=False)
        basis = torch.cumprod(torch.tensor([1, *levels[:-1]], device="cpu"), dim=0, dtype=torch.int32)
        self.register_buffer("_basis", basis, persistent=False)
        self.vocabulary = math.prod(levels)

    def _bound(self, z: torch.Tensor) -> torch.Tensor:
        half_l = (self._levels - 1) * (1 + _BOUND_EPS) / 2
        offset = torch.where(self._levels % 2 == 0, 0.5, 0.0)
        shift = (offset / half_l).atanh()
        return (z + shift).tanh() * half_l - offset

    def forward(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """[B, D, T, H, W] pre-quantisation -> (codes [B, D, T, H, W] float32 in [-1, 1], ids [B, T, H, W] int32)."""
        channels_last = z.movedim(1, -1)
        half_width = self._levels // 2
        bounded = self._bound(channels_last)
        # the reference's straight-through form, which at inference is the rounding except that it makes a rounded
        # -0.0 +0.0 (bit for bit)
        codes = (bounded + (bounded.round() - bounded)) / half_width
        ids = self.codes_to_ids(codes)
        return codes.movedim(-1, 1), ids

    def codes_to_ids(self, codes_last: torch.Tensor) -> torch.Tensor:
        """[..., D] codes -> [...] int32 ids."""
        half_width = self._levels // 2
        levels = (codes_last * half_width + half_width).float()
        return (levels * self._basis).sum(dim=-1).to(torch.int32)

    def ids_to_codes(self, ids: torch.Tensor) -> torch.Tensor:
        """[B, T, H, W] integer ids -> [B, D, T, H, W] float32 codes."""
        half_width = self._levels // 2
        levels = (ids.long().unsqueeze(-1) // self._basis) % self._levels
        return ((levels - half_width) / half_width).movedim(-1, 1)
