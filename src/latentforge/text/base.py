"""The text-encoder interface every backend implements (registered by name in registry.py)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..config import TextConfig

# text.padding -> the fingerprint's "positions": which positions the encoder ran over (cache_config.json records
# the positions; a reader of the cache turns them back into the setting)
POSITIONS = {"none": "prompt", "max_length": "max_length"}

if TYPE_CHECKING:
    import torch


@dataclass
class TextBatch:
    """Encoded prompts, one row per prompt, in the order given."""

    # float32 [N, L, D]; rows at and past `lengths[i]` are exactly 0. L: max_length from an encoder, the longest
    # row's length from a PromptCache
    embeddings: np.ndarray
    lengths: np.ndarray  # int64 [N]: attention_mask.sum() (counts </s>; equals a Cosmos pickle's n_tokens)
    truncated: np.ndarray  # bool [N]: the prompt had more than max_length tokens and was cut


class TextEncoder(ABC):
    """A text encoder: prompts -> last hidden state padded to max_length with exact zeros."""

    name: str = ""
    dataset_prefix: str = ""  # shard datasets are f"{prefix}_text_embeddings" and f"{prefix}_text_length"
    max_length: int = 512
    # precision mode -> the relative L2 by which a re-encode on another device or software stack may differ;
    # the keys are the allowed values of text.precision.
    precisions: ClassVar[dict[str, float]] = {"fp32": 1e-5}

    @classmethod
    def preflight(cls, cfg: TextConfig) -> None:
        """Check the model files `cfg` names before a build writes anything."""

    @classmethod
    @abstractmethod
    def load(cls, cfg: TextConfig, device: torch.device | str = "cpu") -> TextEncoder:
        """The encoder `cfg` names (text.path, precision, max_length), on `device`: how every caller makes one."""

    @classmethod
    def from_config(cls, cfg: TextConfig, device: torch.device | str = "cpu") -> TextEncoder | None:
        """The encoder a build's units run; None under text.source=pickles, where no unit encodes a prompt
        (the commit loads one for empty_prompt.h5 only: pipeline/text_stage.empty_prompt_encoder)."""
        return None if cfg.source == "pickles" else cls.load(cfg, device)

    @property
    @abstractmethod
    def embed_dim(self) -> int:
        """Width D of one token embedding (1024 for T5-XXL/11B, 4096 for umT5-XXL)."""

    @abstractmethod
    def encode(self, prompts: list[str]) -> TextBatch:
        """Encode prompts (batched internally). Identical prompts may be encoded once."""

    def unknown_fractions(self, prompts: list[str]) -> list[float | None]:
        """Per prompt, the fraction of its tokens the encoder's vocabulary does not know (docs/text.md); None where
        the encoder cannot say (one without an unknown token)."""
        return [None] * len(prompts)

    @abstractmethod
    def fingerprint(self) -> dict[str, Any]:
        """What defines the function computed (name, weights SHA-256, precision, max_length); no paths."""
