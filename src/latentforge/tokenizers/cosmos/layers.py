"""The causal 3D building blocks of the Cosmos tokenizers, named as the reference names them (so its state dicts
load as they are): causal convolutions, per-frame group norm, factorized residual blocks and the hybrid
down/up samplers. Each forward runs the reference's operations in its order and memory layout, so fp32 results
are its bits."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def swish(x: torch.Tensor) -> torch.Tensor:
    """x * sigmoid(x), as the reference writes it (F.silu rounds differently)."""
    return x * torch.sigmoid(x)


def frames_to_batch(x: torch.Tensor) -> torch.Tensor:
    """[B, C, T, H, W] -> [B*T, C, H, W] (a copy)."""
    b, c, t, h, w = x.shape
    return x.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w)


def batch_to_frames(x: torch.Tensor, batch: int) -> torch.Tensor:
    """[B*T, C, H, W] -> [B, C, T, H, W] (a view)."""
    bt, c, h, w = x.shape
    return x.reshape(batch, bt // batch, c, h, w).permute(0, 2, 1, 3, 4)


def repeat_first_frame(x: torch.Tensor) -> torch.Tensor:
    return torch.cat([x[:, :, :1], x], dim=2)


class CausalConv3d(nn.Module):
    """A Conv3d whose time axis is padded in front by repeating frame 0 (so output frame t sees input frames <= t)
    and whose height and width are zero-padded by `padding`."""

    def __init__(self, chan_in: int, chan_out: int, kernel_size: int | tuple[int, int, int] = 3, stride: int = 1,
                 time_stride: int = 1, padding: int = 1):
        super().__init__()
        kernel = kernel_size if isinstance(kernel_size, tuple) else (kernel_size,) * 3
        self.time_pad = (kernel[0] - 1) + (1 - time_stride)
        self.spatial_pad = (padding, padding, padding, padding)
        self.conv3d = nn.Conv3d(chan_in, chan_out, kernel, stride=(time_stride, stride, stride))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.cat([x[:, :, :1].repeat(1, 1, self.time_pad, 1, 1), x], dim=2)
        return self.conv3d(F.pad(x, self.spatial_pad + (0, 0), mode="constant", value=0.0))


def factorized_conv(chan_in: int, chan_out: int) -> nn.Sequential:
    """A 1x3x3 spatial convolution then a 3x1x1 causal temporal one (keys `0.conv3d.*`, `1.conv3d.*`)."""
    return nn.Sequential(CausalConv3d(chan_in, chan_out, (1, 3, 3), padding=1),
                         CausalConv3d(chan_out, chan_out, (3, 1, 1), padding=0))


def pointwise(chan_in: int, chan_out: int) -> CausalConv3d:
    return CausalConv3d(chan_in, chan_out, 1, padding=0)


class CausalGroupNorm(nn.Module):
    """GroupNorm with one group, applied to each frame alone (so it stays causal); eps 1e-6."""

    def __init__(self, channels: int):
        super().__init__()
        self.norm = nn.GroupNorm(num_groups=1, num_channels=channels, eps=1e-6, affine=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return batch_to_frames(self.norm(frames_to_batch(x)), x.shape[0])


class FactorizedResnetBlock(nn.Module):
    """norm, swish, factorized conv, twice; plus the input (through a 1x1x1 convolution when widths differ)."""

    def __init__(self, chan_in: int, chan_out: int):
        super().__init__()
        self.norm1 = CausalGroupNorm(chan_in)
        self.conv1 = factorized_conv(chan_in, chan_out)
        self.norm2 = CausalGroupNorm(chan_out)
        self.conv2 = factorized_conv(chan_out, chan_out)
        self.nin_shortcut = pointwise(chan_in, chan_out) if chan_in != chan_out else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv1(swish(self.norm1(x)))
        h = self.conv2(swish(self.norm2(h)))  # dropout 0 at inference
        return self.nin_shortcut(x) + h


class HybridDownsample(nn.Module):
    """Halves height/width (strided 1x3x3 conv + 2x2 average) and/or time (causal strided 3x1x1 conv + 2-frame
    average), then a 1x1x1 conv. The reference builds all three convolutions even where one is never run (its
    checkpoints hold them), so this does too."""

    def __init__(self, channels: int, spatial: bool, temporal: bool):
        super().__init__()
        self.conv1 = CausalConv3d(channels, channels, (1, 3, 3), stride=2, padding=0)
        self.conv2 = CausalConv3d(channels, channels, (3, 1, 1), time_stride=2, padding=0)
        self.conv3 = pointwise(channels, channels)
        self.spatial, self.temporal = spatial, temporal

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not (self.spatial or self.temporal):
            return x
        if self.spatial:
            x = F.pad(x, (0, 1, 0, 1, 0, 0), mode="constant", value=0)
            x = self.conv1(x) + F.avg_pool3d(x, kernel_size=(1, 2, 2), stride=(1, 2, 2))
        if self.temporal:
            x = repeat_first_frame(x)
            x = self.conv2(x) + F.avg_pool3d(x, kernel_size=(2, 1, 1), stride=(2, 1, 1))
        return self.conv3(x)


class HybridUpsample(nn.Module):
    """Doubles time (all frames but the first repeated, + a causal 3x1x1 conv) and/or height/width (nearest,
    + a 1x3x3 conv), then a 1x1x1 conv; all three convolutions exist as in HybridDownsample."""

    def __init__(self, channels: int, spatial: bool, temporal: bool):
        super().__init__()
        self.conv1 = CausalConv3d(channels, channels, (3, 1, 1), padding=0)
        self.conv2 = CausalConv3d(channels, channels, (1, 3, 3), padding=1)
        self.conv3 = pointwise(channels, channels)
        self.spatial, self.temporal = spatial, temporal

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not (self.spatial or self.temporal):
            return x
        if self.temporal:
            factor = 2 if x.shape[2] > 1 else 1
            x = x.repeat_interleave(factor, dim=2)[:, :, factor - 1:]
            x = self.conv1(x) + x
        if self.spatial:
            x = x.repeat_interleave(2, dim=3).repeat_interleave(2, dim=4)
            x = self.conv2(x) + x
        return self.conv3(x)
