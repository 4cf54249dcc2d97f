"""Buckets: the shapes one build may write, one cache each (docs/frames.md, "Buckets")."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..errors import ConfigError
from .schema import FramesConfig


@dataclass(frozen=True, order=True)
class Bucket:
    num_frames: int
    height: int
    width: int

    @property
    def name(self) -> str:
        """The bucket's folder name and id: `<num_frames>x<height>x<width>`."""
        return f"{self.num_frames}x{self.height}x{self.width}"

    @property
    def aspect(self) -> float:
        return self.width / self.height

    def frames_config(self, frames: FramesConfig) -> FramesConfig:
        """`frames` for the single-shape build of this bucket's cache."""
        return dataclasses.replace(frames, num_frames=self.num_frames, height=self.height, width=self.width,
                                   buckets=[], bucket_upscale=False)


def parse_buckets(frames: FramesConfig) -> list[Bucket]:
    """The configured buckets in config order; ConfigError for a malformed or repeated one."""
    found: list[Bucket] = []
    for i, entry in enumerate(frames.buckets):
        if len(entry) != 3 or any(value < 1 for value in entry):
            raise ConfigError(f"frames.buckets[{i}]={entry!r}; each bucket is [num_frames, height, width] of "
                              "positive whole numbers, e.g. [81, 480, 832]")
        bucket = Bucket(*entry)
        if bucket in found:
            raise ConfigError(f"frames.buckets[{i}]={entry!r} is listed twice; list each bucket once")
        found.append(bucket)
    return found
