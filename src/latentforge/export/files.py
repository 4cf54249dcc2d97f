"""One export file as every target describes it, and the copy each of its tensors gets.

Every tensor is cloned into storage of its own: the Dataset hands out views of one batch tensor, and torch.save
writes a view's whole storage, so a view would put the batch into every file."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class ExportFile:
    """One file to write: its path relative to the export folder, its tensors and its string metadata."""

    rel: str
    tensors: dict[str, Any]
    metadata: dict[str, str] | None = None  # safetensors only

    @property
    def is_safetensors(self) -> bool:
        return self.rel.endswith(".safetensors")


def own(tensor: torch.Tensor) -> torch.Tensor:
    """A contiguous copy holding only this tensor's elements."""
    return tensor.clone(memory_format=torch.contiguous_format)
