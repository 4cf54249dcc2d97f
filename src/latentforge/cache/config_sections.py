"""The typed sections of cache_config.json that readers rely on: the latent's modalities and their channels,
and the text datasets."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..config.schema import TextConfig
from .layout import text_prefix
from .text_rows import PADDED

CONDITIONING_ROLE = "conditioning+target"


@dataclass(frozen=True)
class ModalityEntry:
    """One modality's channels [start, end) in the stored latent, and its role."""

    name: str
    channels: tuple[int, int]
    role: str  # "conditioning+target" | "target"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "channels": list(self.channels), "role": self.role}


@dataclass(frozen=True)
class TokenSection:
    """A discrete tokenizer's cache: each row holds token ids [M, T', H', W'] (one stream per modality)."""

    dtype: str  # uint16 while the vocabulary fits
    vocabulary: int  # ids are in [0, vocabulary)
    levels: tuple[int, ...] | None  # FSQ levels, first channel least significant (id = mixed-radix number)
    grid: tuple[int, int, int]  # [T', H', W'] of one modality's ids

    @property
    def sequence_length(self) -> int:
        """T' * H' * W': one modality's ids flattened in (t, h, w) raster order."""
        return self.grid[0] * self.grid[1] * self.grid[2]

    def to_json(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "vocabulary": self.vocabulary,
                "fsq_levels": None if self.levels is None else list(self.levels), "grid": list(self.grid),
                "sequence_length": self.sequence_length}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TokenSection:
        levels = data.get("fsq_levels")
        grid = [int(v) for v in data["grid"]]
        return cls(str(data["dtype"]), int(data["vocabulary"]), None if levels is None else tuple(map(int, levels)),
                   (grid[0], grid[1], grid[2]))


@dataclass(frozen=True)
class LatentSection:
    dataset: str
    shape: tuple[int, ...]  # [C_total, T', H', W'] of one row; tokens: [M, T', H', W']
    modalities: tuple[ModalityEntry, ...]
    conditioning_modality: str | None
    conditioning_frames: tuple[int, int]  # [start, end) latent frames of the conditioning modality
    normalization: str
    tokens: TokenSection | None = None  # a discrete tokenizer's ids; None: float latents

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"dataset": self.dataset, "shape": list(self.shape)}
        if self.tokens is not None:  # only then: a latent cache's file keeps its bytes
            data["tokens"] = self.tokens.to_json()
        data["modalities"] = [m.to_json() for m in self.modalities]
        if self.conditioning_modality is not None:
            data["conditioning"] = {"modality": self.conditioning_modality,
                                    "latent_frames": list(self.conditioning_frames)}
        data["normalization"] = self.normalization
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LatentSection:
        modalities = tuple(ModalityEntry(str(m["name"]), (int(m["channels"][0]), int(m["channels"][1])),
                                         str(m["role"])) for m in data["modalities"])
        conditioning = data.get("conditioning") or {}
        frames = tuple(int(v) for v in conditioning.get("latent_frames", (0, 1)))
        tokens = None if data.get("tokens") is None else TokenSection.from_json(data["tokens"])
        return cls(str(data["dataset"]), tuple(int(v) for v in data["shape"]), modalities,
                   conditioning.get("modality"), (frames[0], frames[1]), str(data.get("normalization")), tokens)


@dataclass(frozen=True)
class TextSection:
    name: str
    embeddings_dataset: str
    length_dataset: str
    dim: int
    max_length: int
    empty_prompt: bool  # empty_prompt.h5 holds the empty prompt's row
    details: dict[str, Any] = field(default_factory=dict)  # source, pickle lookup, the encoder's fingerprint

    @property
    def prefix(self) -> str:
        return text_prefix(self.embeddings_dataset, self.length_dataset)

    @property
    def source(self) -> str:
        return str(self.details.get("source", "encoder"))

    @property
    def precision(self) -> str:
        return str(self.details.get("precision", "fp32"))

    @property
    def max_unknown_fraction(self) -> float:
        """text.max_unknown_fraction of the build; recorded only when not the default."""
        return float(self.details.get("max_unknown_fraction", TextConfig.max_unknown_fraction))

    @property
    def storage(self) -> str:
        """padded or trimmed (text_rows.py); recorded only when trimmed, so padded caches keep their bytes."""
        return str(self.details.get("storage", PADDED))

    def to_json(self) -> dict[str, Any]:
        core = {"name": self.name, "embeddings_dataset": self.embeddings_dataset,
                "length_dataset": self.length_dataset, "dim": self.dim, "max_length": self.max_length,
                "empty_prompt": self.empty_prompt}
        return {**core, **self.details}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TextSection:
        """ValueError unless the two dataset names share a prefix."""
        core = ("name", "embeddings_dataset", "length_dataset", "dim", "max_length", "empty_prompt")
        section = cls(str(data["name"]), str(data["embeddings_dataset"]), str(data["length_dataset"]),
                      int(data["dim"]), int(data["max_length"]), bool(data["empty_prompt"]),
                      {k: v for k, v in data.items() if k not in core})
        text_prefix(section.embeddings_dataset, section.length_dataset)
        return section
