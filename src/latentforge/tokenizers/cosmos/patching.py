"""Cosmos' 3D Haar patching: each level splits every channel into 8 bands (low/high along time, height, width),
halving the three axes; the inverse puts them back. Frame 0 is repeated `patch_size` times first (and dropped
after the inverse), so a causal clip of 1 + k*patch_size frames patches to 1 + k frames.

Both directions run the grouped 2-tap convolutions of the reference in its order (time, height, width; bands
concatenated low before high, time outermost) and scale by 1/sqrt(8) and sqrt(8), so the bits are the
reference's.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

_HAAR_TAP = 0.7071067811865476  # 1/sqrt(2)
_AXES = (2, 3, 4)  # time, height, width of [B, C, T, H, W]


def _kernels(dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(low, high) taps as float32 tensors made as the reference makes them, then cast to `dtype`."""
    taps = torch.tensor([_HAAR_TAP, _HAAR_TAP])
    low = taps.flip(0)
    high = taps * ((-1) ** torch.arange(2))
    return low.to(device, dtype), high.to(device, dtype)


def _shaped(taps: torch.Tensor, groups: int, axis: int) -> torch.Tensor:
    """[groups, 1, kt, kh, kw] with the two taps along `axis`."""
    shape = [groups, 1, 1, 1, 1]
    shape[axis] = 2
    return taps.reshape(1, 1, -1).repeat(groups, 1, 1).reshape(shape)


def _stride(axis: int) -> tuple[int, int, int]:
    return tuple(2 if a == axis else 1 for a in _AXES)


def _sqrt8() -> torch.Tensor:
    return 2 * torch.sqrt(torch.tensor(2.0))


class HaarPatcher3d(nn.Module):
    """[B, 3, 1 + k*p, H, W] -> [B, 3*p**3, 1 + k, H/p, W/p]; no weights."""

    def __init__(self, patch_size: int):
        super().__init__()
        self.patch_size = patch_size
        self.levels = int(math.log2(patch_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.cat([x[:, :, :1].repeat_interleave(self.patch_size, dim=2), x[:, :, 1:]], dim=2)
        for _ in range(self.levels):
            x = self._split(x)
        return x

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        groups = x.shape[1]
        low, high = _kernels(x.dtype, x.device)
        # the reference pads one sample at the end of each axis (reflect) before the strided convolutions; for
        # the even sizes the geometry allows it is never read, but it keeps the reference's shapes
        bands = [F.pad(x, (0, 1, 0, 1, 0, 1), mode="reflect").to(x.dtype)]
        for axis in _AXES:
            bands = [F.conv3d(band, _shaped(taps, groups, axis), groups=groups, stride=_stride(axis))
                     for band in bands for taps in (low, high)]
        return torch.cat(bands, dim=1) / _sqrt8()


class HaarUnpatcher3d(nn.Module):
    """The inverse: [B, 3*p**3, 1 + k, h, w] -> [B, 3, 1 + k*p, h*p, w*p]."""

    def __init__(self, patch_size: int):
        super().__init__()
        self.patch_size = patch_size
        self.levels = int(math.log2(patch_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.levels):
            x = self._merge(x)
        return x[:, :, self.patch_size - 1:]

    def _merge(self, x: torch.Tensor) -> torch.Tensor:
        groups = x.shape[1] // 8
        low, high = _kernels(x.dtype, x.device)
        bands = list(torch.chunk(x, 8, dim=1))
        for axis in reversed(_AXES):  # width pairs first, time last: the forward order undone
            bands = [
                F.conv_transpose3d(bands[i], _shaped(low, groups, axis), groups=groups, stride=_stride(axis))
                + F.conv_transpose3d(bands[i + 1], _shaped(high, groups, axis), groups=groups, stride=_stride(axis))
                for i in range(0, len(bands), 2)
            ]
        return bands[0] * _sqrt8()
