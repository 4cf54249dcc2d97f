"""The captioner interface every backend implements (registered by name in registry.py, kind `captioner`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config import CaptionsConfig

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Generation:
    """What a captioner wrote for one window: the decoded text (stripped), and whether the model ended it itself
    (False: it ran into captions.max_new_tokens, and the text is cut off)."""

    text: str
    ended: bool

    @property
    def usable(self) -> bool:
        return bool(self.text) and self.ended


class Captioner(ABC):
    """A vision-language model: a window's sampled frames and a prompt -> a caption, decoded greedily."""

    name: str = ""

    @classmethod
    def preflight(cls, cfg: CaptionsConfig) -> None:
        """Check the model folder `cfg` names (architecture, files, pinned SHA-256) before a build writes anything."""

    @classmethod
    @abstractmethod
    def checkpoint_digest(cls, model: str) -> str:
        """The SHA-256 that captions.sha256 pins: of the weights' sha256sum listing, sorted by file name."""

    @classmethod
    @abstractmethod
    def load(cls, cfg: CaptionsConfig, device: torch.device | str) -> Captioner:
        """The captioner `cfg` names, on `device`."""

    @abstractmethod
    def generate(self, windows: list[np.ndarray], prompt: str, max_new_tokens: int) -> list[Generation]:
        """One Generation per window (uint8 [F, H, W, 3] RGB frames), in order, greedy: the same frames, prompt and
        model give the same text on the same device and software."""

    @classmethod
    @abstractmethod
    def identity(cls, cfg: CaptionsConfig, device: torch.device | str) -> dict[str, Any]:
        """What defines the captions it writes on `device` besides the frames and the prompt (model digests, dtype);
        no paths. Read from the files, without loading the model: a rerun whose captions are all recorded loads
        none."""
