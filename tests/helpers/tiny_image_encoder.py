"""A tiny image encoder plugged in through the public seam (registry kind `image_encoder`), for builds that store
`clip_image_embeds` before a real encoder is installed: a seeded linear map of frame 0's pixels, so every pixel
and the uint8 values the build hands over change its output."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import torch

from latentforge import registry
from latentforge.conditioning.image_encoder import ImageEncoder
from latentforge.errors import ConfigError

NAME = "tiny-image-encoder"
TOKENS, WIDTH = 3, 4


class TinyImageEncoder(ImageEncoder):
    name = NAME
    precisions = {"fp32": 1e-5, "bf16": 2e-2}
    tokens, width = TOKENS, WIDTH
    calls: list[torch.Tensor] = []  # every batch of frames it was handed, as the build handed them

    def __init__(self, path: str, precision: str):
        self.path, self.precision = path, precision

    @classmethod
    def preflight(cls, path: str | None, expected_sha256: str | None) -> None:
        if not path or not Path(path).exists():
            raise ConfigError(f"conditioning.image_encoder_path={path!r} does not exist; give the encoder's folder")

    @classmethod
    def checkpoint_digest(cls, path: str) -> str:
        """It has no weights to read: its function is the seeded projection, the same for every path."""
        return hashlib.sha256(f"{NAME} seed 7".encode()).hexdigest()

    @classmethod
    def load(cls, path: str, device: str, precision: str, expected_sha256: str | None) -> TinyImageEncoder:
        cls.preflight(path, expected_sha256)
        return cls(path, precision)

    def encode(self, frames: torch.Tensor) -> torch.Tensor:
        if frames.dtype != torch.uint8 or frames.ndim != 4 or frames.shape[-1] != 3:
            raise ValueError(f"expected uint8 [B, H, W, 3], got {frames.dtype} {list(frames.shape)}")
        TinyImageEncoder.calls.append(frames.cpu().clone())
        return project(frames)

    def fingerprint(self) -> dict[str, Any]:
        return {"name": NAME, "checkpoint_sha256": None, "preprocessing": "none", "precision": self.precision}


def project(frames: torch.Tensor) -> torch.Tensor:
    """float32 [B, TOKENS, WIDTH]: a fixed random projection of the pixels scaled to [0, 1]."""
    flat = frames.reshape(frames.shape[0], -1).double() / 255.0
    weights = torch.randn(flat.shape[1], TOKENS * WIDTH, generator=torch.Generator().manual_seed(7),
                          dtype=torch.float64)
    return (flat @ weights / flat.shape[1] ** 0.5).float().reshape(-1, TOKENS, WIDTH)


def register_tiny_image_encoder() -> str:
    """Register it once in this process; its name."""
    if NAME not in registry.names("image_encoder"):
        registry.register("image_encoder", NAME, TinyImageEncoder)
    return NAME
