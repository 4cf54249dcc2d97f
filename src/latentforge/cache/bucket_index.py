"""ROOT/buckets.json of a bucketed root: which buckets it has, where, how many samples and which latent shape
each holds (docs/cache-format.md, "Bucketed roots"). Written by the build after every bucket is complete;
read by verify, inspect, stats, publish and the training dataset."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import CacheIntegrityError
from ..io import canonical_json, write_text_atomic
from ..version import __version__
from .layout import BUCKET_INDEX, BUCKETS_DIR, bucket_path

FORMAT = "latentforge-buckets"
FORMAT_VERSION = 1
RULE = "aspect (share of the picture kept), then height x width, then frames; no upscaling unless allowed"


@dataclass(frozen=True)
class BucketEntry:
    name: str  # <num_frames>x<height>x<width>
    num_frames: int
    height: int
    width: int
    num_samples: int
    path: str | None  # the bucket's cache root relative to ROOT; None when no sample went to it
    latent_shape: tuple[int, ...] | None  # [C, T', H', W'] of its latent dataset; None without a cache

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "num_frames": self.num_frames, "height": self.height, "width": self.width,
                "num_samples": self.num_samples, "path": self.path,
                "latent_shape": None if self.latent_shape is None else list(self.latent_shape)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BucketEntry:
        shape = data["latent_shape"]
        return cls(str(data["name"]), int(data["num_frames"]), int(data["height"]), int(data["width"]),
                   int(data["num_samples"]), data["path"], None if shape is None else tuple(int(v) for v in shape))


@dataclass(frozen=True)
class BucketIndex:
    buckets: tuple[BucketEntry, ...]  # in config order
    upscale: bool
    num_rejects: int  # rejected before a bucket was chosen (ROOT/rejects.jsonl)
    latentforge_version: str = __version__

    @property
    def num_samples(self) -> int:
        return sum(entry.num_samples for entry in self.buckets)

    @property
    def filled(self) -> list[BucketEntry]:
        """The buckets that hold a cache (at least one sample)."""
        return [entry for entry in self.buckets if entry.path is not None]

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "format_version": FORMAT_VERSION, "latentforge_version": self.latentforge_version,
                "rule": RULE, "upscale": self.upscale, "num_samples": self.num_samples,
                "num_rejects": self.num_rejects, "buckets": [entry.to_json() for entry in self.buckets]}

    def write(self, root: Path) -> None:
        write_text_atomic(Path(root) / BUCKET_INDEX, canonical_json(self.to_json()) + "\n")

    @classmethod
    def load(cls, root: Path) -> BucketIndex:
        path = Path(root) / BUCKET_INDEX
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("format") != FORMAT or data.get("format_version") != FORMAT_VERSION:
                raise ValueError(f"format {data.get('format')!r} version {data.get('format_version')!r}")
            index = cls(tuple(BucketEntry.from_json(entry) for entry in data["buckets"]), bool(data["upscale"]),
                        int(data["num_rejects"]), str(data["latentforge_version"]))
        except FileNotFoundError:
            raise CacheIntegrityError(f"{path} is missing: the bucketed build did not finish; rerun the same "
                                      "build command to complete it") from None
        except (ValueError, KeyError, TypeError) as error:
            raise CacheIntegrityError(f"{path} is not a latentforge bucket index ({error}); rebuild the cache") \
                from None
        for entry in index.filled:
            if entry.path != bucket_path(entry.name):
                raise CacheIntegrityError(f"{path}: bucket {entry.name} has path {entry.path!r}, expected "
                                          f"{bucket_path(entry.name)!r}")
        return index


def is_bucketed(root: Path) -> bool:
    """A root of one cache per bucket (finished or not), rather than a single cache."""
    root = Path(root)
    return (root / BUCKET_INDEX).is_file() or (root / BUCKETS_DIR).is_dir()
