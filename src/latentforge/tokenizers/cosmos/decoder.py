"""The factorized causal decoder: a factorized input conv, the middle blocks, residual levels from the coarsest
(num_res_blocks + 1 blocks each, a hybrid upsample after each but the finest), norm, swish, a factorized output
conv and the inverse Haar patching. Module names are the reference's `DecoderFactorized` ones (`up[0]` is the
finest level, run last)."""

from __future__ import annotations

import torch
from torch import nn

from .architecture import CosmosArchitecture
from .attention import attention_pair
from .encoder import middle, run_middle
from .layers import CausalGroupNorm, FactorizedResnetBlock, HybridUpsample, factorized_conv, swish
from .patching import HaarUnpatcher3d


def upsampling(arch: CosmosArchitecture, level: int, levels: int) -> tuple[bool, bool]:
    """(spatial, temporal) of the upsample after `level`: the reference's rule, counting levels from the coarsest
    (its non-legacy mode: the coarsest upsample never doubles time)."""
    from_coarsest = levels - level - 1
    temporal = 0 < from_coarsest < arch.temporal_downs + 1
    spatial = temporal or (from_coarsest < arch.spatial_downs and arch.spatial_downs > arch.temporal_downs)
    return spatial, temporal


class CosmosDecoder(nn.Module):
    """[B, z_channels, 1 + k, h, w] -> [B, 3, 1 + k*t, h*s, w*s]."""

    def __init__(self, arch: CosmosArchitecture):
        super().__init__()
        mults = arch.decoder_channels_mult
        levels = len(mults)
        block_in = arch.channels * mults[-1]
        resolution = (arch.resolution // arch.patch_size) // 2 ** (levels - 1)
        self.conv_in = factorized_conv(arch.z_channels, block_in)
        self.mid = middle(block_in)
        stages: list[nn.Module] = []
        for level in reversed(range(levels)):
            stage = nn.Module()
            stage.block, stage.attn = nn.ModuleList(), nn.ModuleList()
            block_out = arch.channels * mults[level]
            for _ in range(arch.num_res_blocks + 1):
                stage.block.append(FactorizedResnetBlock(block_in, block_out))
                block_in = block_out
                if resolution in arch.attn_resolutions:
                    stage.attn.append(attention_pair(block_in))
            if level != 0:
                spatial, temporal = upsampling(arch, level, levels)
                stage.upsample = HybridUpsample(block_in, spatial=spatial, temporal=temporal)
                resolution *= 2
            stages.insert(0, stage)
        self.up = nn.ModuleList(stages)
        self.norm_out = CausalGroupNorm(block_in)
        self.conv_out = factorized_conv(block_in, 3 * arch.patch_size**3)
        self.unpatcher3d = HaarUnpatcher3d(arch.patch_size)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        h = run_middle(self.mid, self.conv_in(z))
        for stage in reversed(self.up):
            for index, block in enumerate(stage.block):
                h = block(h)
                if len(stage.attn) > 0:
                    h = stage.attn[index](h)
            if hasattr(stage, "upsample"):
                h = stage.upsample(h)
        return self.unpatcher3d(self.conv_out(swish(self.norm_out(h))))
