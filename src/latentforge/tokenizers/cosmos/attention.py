"""Cosmos' attention blocks: one head over the pixels of each frame (spatial), then one head over the frames of
each pixel with a causal mask (temporal); keys `norm.norm`, `q`, `k`, `v`, `proj_out` as in the reference.
Written with the reference's matmuls, scaling after the product and softmax, so fp32 results are its bits."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .layers import CausalGroupNorm, batch_to_frames, frames_to_batch, pointwise


class _Attention(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.norm = CausalGroupNorm(channels)
        self.q = pointwise(channels, channels)
        self.k = pointwise(channels, channels)
        self.v = pointwise(channels, channels)
        self.proj_out = pointwise(channels, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        return x + self.proj_out(self.attend(self.q(h), self.k(h), self.v(h)))

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class SpatialAttention(_Attention):
    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        batch = q.shape[0]
        q, k, v = frames_to_batch(q), frames_to_batch(k), frames_to_batch(v)
        bt, c, h, w = q.shape
        weights = torch.bmm(q.reshape(bt, c, h * w).permute(0, 2, 1), k.reshape(bt, c, h * w))
        weights = F.softmax(weights * (int(c) ** (-0.5)), dim=2)
        out = torch.bmm(v.reshape(bt, c, h * w), weights.permute(0, 2, 1))
        return batch_to_frames(out.reshape(bt, c, h, w), batch)


def _pixels_to_batch(x: torch.Tensor) -> torch.Tensor:
    """[B, C, T, H, W] -> [B*H*W, C, T]."""
    b, c, t, h, w = x.shape
    return x.permute(0, 3, 4, 1, 2).reshape(b * h * w, c, t)


class TemporalAttention(_Attention):
    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        b, c, t, height, width = q.shape
        q, k, v = (_pixels_to_batch(x).permute(0, 2, 1) for x in (q, k, v))  # [BHW, T, C]
        weights = torch.bmm(q, k.permute(0, 2, 1)) * (int(c) ** (-0.5))
        weights = weights.masked_fill(torch.tril(torch.ones_like(weights)) == 0, float("-inf"))
        out = torch.bmm(F.softmax(weights, dim=2), v)  # [BHW, T, C]
        out = out.permute(0, 2, 1).reshape(b * height * width, c, t)
        return out.reshape(b, height, width, c, t).permute(0, 3, 4, 1, 2)


def attention_pair(channels: int) -> nn.Sequential:
    """Spatial then temporal attention (keys `0.*`, `1.*`), as every attention site of the reference."""
    return nn.Sequential(SpatialAttention(channels), TemporalAttention(channels))
