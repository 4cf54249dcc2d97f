"""The conditioning streams a cache may hold beside each clip's latent (docs/conditioning.md), and the
`conditioning` section of cache_config.json that describes them.

A stream is one per-sample array with its own name: the HDF5 dataset, the WebDataset member (`NAME.npy`) and
the key training readers return are all that name. Writers, integrity verify and readers work from these
descriptions alone, so a new stream (another image encoder's tokens) needs no change to them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

IMAGE_COND_LATENT = "image_cond_latent"  # Wan I2V's y: frame mask + the encode of [frame 0, zeros]
CLIP_IMAGE_EMBEDS = "clip_image_embeds"  # the image encoder's tokens of frame 0
MASK_CHANNELS = 4  # y's mask: one channel per pixel frame of a latent frame (the temporal factor)
CONDITION_FRAME = "condition_frame"  # the manifest field: the source frame index frame 0 was taken from


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
