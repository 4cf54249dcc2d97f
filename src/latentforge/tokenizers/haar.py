"""`haar-4x8x8`: an analytic causal tokenizer with Wan2.1's geometry, for tests and CPU pipelines.

No weights. Each block of g frames x 8x8 pixels x 3 colours (g = 1 for pixel frame 0, then g = 4) is
projected on 16 mutually orthogonal Walsh patterns; see docs/tokenizers.md for the exact patterns.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..config import TokenizerConfig
from ..errors import ConfigError, LatentforgeError
from .base import Tokenizer

CHANNEL_NAMES = (
    "low_r", "low_g", "low_b",
    "left_right_r", "left_right_g", "left_right_b",
    "top_bottom_r", "top_bottom_g", "top_bottom_b",
    "diagonal_r", "diagonal_g", "diagonal_b",
    "time_r", "time_g", "time_b",
    "luma_checker",
)
BLOCK = 8


def block_patterns(frames: int) -> torch.Tensor:
    """[16, 3, frames, 8, 8] float64 patterns, orthonormal under the block mean of the sum over colours.

    Single-colour patterns are +-1 on their colour; the luma checker is +-1/sqrt(3) on every colour so it
    has unit length too. The time patterns are +1 on the first half of the frames and -1 on the second;
    a block of one frame has no second half, so they are all zero there.
    """
    half = torch.tensor([1.0] * (BLOCK // 2) + [-1.0] * (BLOCK // 2), dtype=torch.float64)
    left_right = half.view(1, 1, BLOCK).expand(frames, BLOCK, BLOCK)
    top_bottom = half.view(1, BLOCK, 1).expand(frames, BLOCK, BLOCK)
    time = torch.zeros(frames, dtype=torch.float64)
    if frames > 1:
        time[: frames // 2], time[frames // 2:] = 1.0, -1.0
    parity = torch.arange(BLOCK).view(BLOCK, 1) + torch.arange(BLOCK).view(1, BLOCK)
    checker = (1.0 - 2.0 * (parity % 2)).to(torch.float64) / math.sqrt(3.0)
    patterns = torch.zeros(16, 3, frames, BLOCK, BLOCK, dtype=torch.float64)
    for colour in range(3):
        patterns[colour, colour] = 1.0
        patterns[3 + colour, colour] = left_right
        patterns[6 + colour, colour] = top_bottom
        patterns[9 + colour, colour] = left_right * top_bottom
        patterns[12 + colour, colour] = time.view(frames, 1, 1).expand(frames, BLOCK, BLOCK)
    patterns[15] = checker.expand(3, frames, BLOCK, BLOCK)
    return patterns


class HaarTokenizer(Tokenizer):
    """Latent [B,16,1+(T-1)/4,H/8,W/8]: channel k = block mean of (pixels x pattern k); decode = sum z_k p_k.

    decode is the adjoint of encode, so decode(encode(x)) is the orthogonal projection of x onto the span
    of the patterns. Latents are not normalised (mean 0, std 1) and decoded pixels are not clamped, both so
    that the projection stays exact. Always computes in float32; tokenizer.precision does not apply.
    """

    name = "haar-4x8x8"
    latent_channels = 16
    temporal_factor = 4
    spatial_factor = BLOCK
    causal = True
    # Always float32 and exact: every precision mode is accepted and computes the same function (presets may
    # ask for another mode when a test or the demo swaps this tokenizer in); the fingerprint records fp32.
    precisions = {"fp32": 1e-5, "bf16": 1e-5, "cosmos-bf16": 1e-5}

    def __init__(self, device: torch.device | str = "cpu"):
        super().__init__(device)
        patterns = {g: block_patterns(g) for g in (1, self.temporal_factor)}
        self._synthesis = {g: p.to(self.device, torch.float32) for g, p in patterns.items()}
        # encode: each block's pixels times the patterns' signs summed in float64, then one scale per channel (the
        # block mean's 1 / (g x 64), and 1 / sqrt(3) for the luma checker). Pixels from the uint8 table are
        # float32 multiples of 2^-31 below 1 in size, so every partial sum of a block's 768 of them is exact in
        # float64's 53 bits: the latent is the same bits whatever order a CPU or GPU sums in (AVX2, AVX-512 and
        # AMX machines rounded a float32 einsum differently)
        self._signs = {g: torch.sign(p).to(self.device) for g, p in patterns.items()}
        self._scales = {g: (p.abs().amax(dim=(1, 2, 3, 4)) / (g * BLOCK * BLOCK)).view(1, 16, 1, 1, 1).to(self.device)
                        for g, p in patterns.items()}  # fmt: skip

    @classmethod
    def check_settings(cls, cfg: TokenizerConfig) -> None:
        super().check_settings(cfg)
        for key, value in (("checkpoint", cfg.checkpoint), ("sha256", cfg.sha256)):
            if value is not None:
                raise ConfigError(f"tokenizer.{key}={value!r}: {cls.name} is analytic and has no weights; unset it "
                                  "(or choose --tokenizer wan2.1)")

    @classmethod
    def from_config(cls, cfg: TokenizerConfig, device: torch.device | str) -> HaarTokenizer:
        cls.check_settings(cfg)
        return cls(device)

    def encode(self, video: torch.Tensor) -> torch.Tensor:
        if video.dim() != 5 or video.shape[1] != 3:
            raise LatentforgeError(f"{self.name}.encode expects [B,3,T,H,W] pixels, got {tuple(video.shape)}")
        self.check_geometry(*video.shape[2:])
        video = video.to(self.device, torch.float32)
        parts = [self._analyse(video[:, :, :1], 1)]  # pixel frame 0 alone: the causal first latent frame
        if video.shape[2] > 1:
            parts.append(self._analyse(video[:, :, 1:], self.temporal_factor))
        return torch.cat(parts, dim=2)

    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        if latent.dim() != 5 or latent.shape[1] != self.latent_channels:
            raise LatentforgeError(
                f"{self.name}.decode expects [B,{self.latent_channels},T',H',W'] latents, got {tuple(latent.shape)}"
            )
        latent = latent.to(self.device, torch.float32)
        parts = [self._synthesise(latent[:, :, :1], 1)]
        if latent.shape[2] > 1:
            parts.append(self._synthesise(latent[:, :, 1:], self.temporal_factor))
        return torch.cat(parts, dim=2)

    def _analyse(self, video: torch.Tensor, frames: int) -> torch.Tensor:
        b, c, t, h, w = video.shape
        blocks = video.double().reshape(b, c, t // frames, frames, h // BLOCK, BLOCK, w // BLOCK, BLOCK)
        sums = torch.einsum("bcngiyjx,kcgyx->bknij", blocks, self._signs[frames])
        return (sums * self._scales[frames]).float()

    def _synthesise(self, latent: torch.Tensor, frames: int) -> torch.Tensor:
        b, _, n, hl, wl = latent.shape
        blocks = torch.einsum("bknij,kcgyx->bcngiyjx", latent, self._synthesis[frames])
        return blocks.reshape(b, 3, n * frames, hl * BLOCK, wl * BLOCK)

    def fingerprint(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": 2,  # 2: the exact float64 sums (1 rounded a float32 einsum, differently per CPU)
            "latent_channels": self.latent_channels,
            "temporal_factor": self.temporal_factor,
            "spatial_factor": self.spatial_factor,
            "causal": self.causal,
            "precision": "fp32",
            "normalization": "none",
            "channels": list(CHANNEL_NAMES),
        }
