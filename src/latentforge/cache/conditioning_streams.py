"""The conditioning streams a cache may hold beside each clip's latent (docs/conditioning.md), and the
`conditioning` section of cache_config.json that describes them.

A stream is one per-sample array with its own name: the HDF5 dataset, the WebDataset member (`NAME.npy`) and
the key training readers return are all that name. Writers, integrity verify and readers work from these
descriptions alone, so a new stream (another image encoder's tokens) needs no change to them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

IMAGE_COND_LATENT = "image_cond_latent"  # Wan I2V's y: frame mask + the encode of [frame 0, zeros]
CLIP_IMAGE_EMBEDS = "clip_image_embeds"  # the image encoder's tokens of frame 0
MASK_CHANNELS = 4  # y's mask: one channel per pixel frame of a latent frame (the temporal factor)
CONDITION_FRAME = "condition_frame"  # the manifest field: the source frame index frame 0 was taken from
CONDITIONING_CHECK = "conditioning_rows"  # the integrity check of every sink over the stored streams
CONDITIONING_DETAIL = ("conditioning streams have their recorded shapes, no NaN or Inf, image_cond_latent's mask "
                       "ones over latent frame 0 only; each manifest row's condition_frame is its first source frame")


@dataclass(frozen=True)
class ConditioningStream:
    """One per-sample conditioning array: its name, shape and dtype as stored, and what produced it."""

    name: str
    shape: tuple[int, ...]  # one sample's
    dtype: str  # the storage dtype (output.storage_dtype)
    producer: dict[str, Any] = field(default_factory=dict)  # what made it: the encoder's fingerprint or the rule

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype, "producer": self.producer}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ConditioningStream:
        return cls(str(data["name"]), tuple(int(v) for v in data["shape"]), str(data["dtype"]),
                   dict(data.get("producer") or {}))


@dataclass(frozen=True)
class ConditioningSection:
    """cache_config.json's `conditioning`: the settings, the stored streams, and where a condition is that is not
    stored on its own (first-frame: latent frame 0 of the clip's latent)."""

    image_latent: str  # none | wan-i2v | first-frame
    image_embeds: str  # none or the image encoder's name
    precision: str
    streams: tuple[ConditioningStream, ...] = ()
    # first-frame: {"dataset": the latent dataset, "latent_frames": [0, 1], "equals": why no copy is stored}
    in_latent: dict[str, Any] | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(stream.name for stream in self.streams)

    def stream(self, name: str) -> ConditioningStream | None:
        return next((stream for stream in self.streams if stream.name == name), None)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"image_latent": self.image_latent, "image_embeds": self.image_embeds,
                                "precision": self.precision, "condition_frame": "pixel frame 0 of the window "
                                "(its source frame index is the manifest's condition_frame)",
                                "streams": [stream.to_json() for stream in self.streams]}
        if self.in_latent is not None:
            data["in_latent"] = self.in_latent
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ConditioningSection:
        return cls(str(data["image_latent"]), str(data["image_embeds"]), str(data["precision"]),
                   tuple(ConditioningStream.from_json(s) for s in data.get("streams") or ()),
                   None if data.get("in_latent") is None else dict(data["in_latent"]))


def stream_row_problem(stream: ConditioningStream, values: np.ndarray) -> str | None:
    """What is wrong with one stored row of a stream (integrity verify, every sink), or None: its shape, finite
    values, and for image_cond_latent the mask channels (ones over latent frame 0, zeros elsewhere)."""
    if tuple(values.shape) != stream.shape:
        return f"{stream.name} row has shape {list(values.shape)}, cache_config.json says {list(stream.shape)}"
    if not np.isfinite(values).all():
        return f"{stream.name} holds NaN or Inf"
    if stream.name == IMAGE_COND_LATENT:
        mask = values[:MASK_CHANNELS]
        if not (mask[:, :1] == 1).all() or (mask[:, 1:] != 0).any():
            return f"{stream.name}'s {MASK_CHANNELS} mask channels are not ones over latent frame 0 and zeros elsewhere"
    return None


def condition_frame_problem(conditioned: bool, condition_frame: int | None, frame_indices: list[int]) -> str | None:
    """A manifest row's condition_frame against its window (pixel frame 0's source index), or its absence in a
    cache without conditioning."""
    if not conditioned:
        return None if condition_frame is None else f"{CONDITION_FRAME} {condition_frame!r} without conditioning"
    if condition_frame != frame_indices[0]:
        return f"{CONDITION_FRAME} {condition_frame!r} is not the window's first source frame {frame_indices[0]}"
    return None
