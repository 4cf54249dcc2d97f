"""The image-encoder interface every backend of kind `image_encoder` implements (registered in registry.py).

An image encoder turns the condition frame of each sample (frame 0 at the cache's resolution) into the tokens an
image-to-video model cross-attends to, e.g. Wan2.1 I2V's 257 x 1280 CLIP tokens.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    import torch


class ImageEncoder(ABC):
    """uint8 RGB frames -> float32 tokens [B, tokens, width]."""

    name: ClassVar[str] = ""
    # precision mode -> the relative L2 by which a re-encode on another device or software stack may differ;
    # the keys are the allowed values of conditioning.precision
    precisions: ClassVar[dict[str, float]] = {"fp32": 1e-5}
    tokens: int  # tokens per image (257 for the released ViT-H/14 at 224 x 224: 16 x 16 patches + the class token)
    width: int  # width of one token (1280 for the released ViT-H/14)
    # where `encode` wants its frames: True when it preprocesses them on the host (then a build on a GPU copies
    # frame 0 there without waiting for the device's queue), False when every step runs on its device
    host_frames: bool = False

    @classmethod
    @abstractmethod
    def preflight(cls, path: str, expected_sha256: str | None) -> None:
        """Check the checkpoint `path` names (and its SHA-256) before a build writes anything: ConfigError naming
        the file, the value and the fix."""

    @classmethod
    @abstractmethod
    def checkpoint_digest(cls, path: str) -> str:
        """The SHA-256 of the weights `path` names, as `expected_sha256` is compared with: a resumed build refuses
        other weights at the same path."""

    @classmethod
    @abstractmethod
    def load(cls, path: str, device: str, precision: str, expected_sha256: str | None) -> ImageEncoder:
        """The encoder of the checkpoint `path`, on `device`, running at `precision` (a key of `precisions`)."""

    @abstractmethod
    def encode(self, frames: torch.Tensor) -> torch.Tensor:
        """uint8 [B, H, W, 3] RGB on any device -> float32 [B, tokens, width] on the encoder's device."""

    @abstractmethod
    def fingerprint(self) -> dict[str, Any]:
        """What defines the function computed (name, checkpoint SHA-256, preprocessing, precision); no paths.
        Deep verify and resume compare it."""
