"""The factorized causal encoder: Haar patching, a factorized input conv, residual levels (attention where the
level's resolution is listed, a hybrid downsample after each level but the last), the middle blocks, norm, swish
and a factorized output conv. Module names are the reference's `EncoderFactorized` ones."""

from __future__ import annotations

import torch
from torch import nn

from .architecture import CosmosArchitecture
from .attention import attention_pair
from .layers import CausalGroupNorm, FactorizedResnetBlock, HybridDownsample, factorized_conv, swish
from .patching import HaarPatcher3d


def middle(channels: int) -> nn.Module:
    """block_1, attn_1 (spatial + temporal attention), block_2."""
    mid = nn.Module()
    mid.block_1 = FactorizedResnetBlock(channels, channels)
    mid.attn_1 = attention_pair(channels)
    mid.block_2 = FactorizedResnetBlock(channels, channels)
    return mid


def run_middle(mid: nn.Module, h: torch.Tensor) -> torch.Tensor:
    return mid.block_2(mid.attn_1(mid.block_1(h)))


class CosmosEncoder(nn.Module):
    """[B, 3, 1 + k*t, H, W] in [-1, 1] -> [B, z_channels, 1 + k, H/s, W/s]."""

    def __init__(self, arch: CosmosArchitecture):
        super().__init__()
        self.patcher3d = HaarPatcher3d(arch.patch_size)
        self.conv_in = factorized_conv(3 * arch.patch_size**3, arch.channels)
        resolution = arch.resolution // arch.patch_size
        widths = [arch.channels * m for m in (1, *arch.channels_mult)]
        last = len(arch.channels_mult) - 1
        self.down = nn.ModuleList()
        for level in range(len(arch.channels_mult)):
            stage = nn.Module()
            stage.block, stage.attn = nn.ModuleList(), nn.ModuleList()
            block_in = widths[level]
            for _ in range(arch.num_res_blocks):
                stage.block.append(FactorizedResnetBlock(block_in, widths[level + 1]))
                block_in = widths[level + 1]
                if resolution in arch.attn_resolutions:
                    stage.attn.append(attention_pair(block_in))
            if level != last:
                stage.downsample = HybridDownsample(block_in, spatial=level < arch.spatial_downs,
                                                    temporal=level < arch.temporal_downs)
                resolution //= 2
            self.down.append(stage)
        self.mid = middle(widths[-1])
        self.norm_out = CausalGroupNorm(widths[-1])
        self.conv_out = factorized_conv(widths[-1], arch.z_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv_in(self.patcher3d(x))
        for stage in self.down:
            for index, block in enumerate(stage.block):
                h = block(h)
                if len(stage.attn) > 0:
                    h = stage.attn[index](h)
            if hasattr(stage, "downsample"):
                h = stage.downsample(h)
        h = run_middle(self.mid, h)
        return self.conv_out(swish(self.norm_out(h)))
