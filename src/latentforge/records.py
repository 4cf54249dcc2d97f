"""Records passed between the stages of the flow: reader -> plan -> probe -> decode -> encode -> stage.

`Reject` is also the row type of a cache's rejects.jsonl.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from .errors import REJECT_REASONS

if TYPE_CHECKING:
    from .errors import SampleRejected

# Where in the flow a sample was rejected, in flow order.
REJECT_STAGES = ("plan", "probe", "decode", "encode")


@dataclass(frozen=True)
class SourceEntry:
    """One row of the input listing as a reader yields it, before windows are cut."""

    key: str  # table id column, else the video path relative to the dataset root without extension (NFC)
    video: str  # resolved path of the video file
    video_rel: str  # the video path as the manifest records it (relative to the dataset root where possible)
    caption: str | None  # None: no caption was found
    mask: str | None = None  # mask source (PNG folder or lossless video); None when absent
    depth: str | None = None  # depth source (.npz/.npy, 16-bit PNG folder or video); None when absent
    t5_pickle: str | None = None  # table reader: the row's Cosmos T5 pickle (dataset.t5_pickle_column)
    extra: dict[str, Any] = field(default_factory=dict)  # pass-through columns copied into the manifest
    # Where the listing holds it ("table t.csv row 2", "videos/a.mp4"), for messages; not part of what it is.
    origin: str = field(default="", compare=False)

    @property
    def root(self) -> str | None:
        """The dataset folder the relative paths start from ("<root>/" + video_rel is the video), or None when
        the listing gave the video by an absolute path."""
        if os.path.isabs(self.video_rel) or not self.video.endswith(os.sep + self.video_rel):
            return None
        root = self.video[: -len(self.video_rel)]
        return root if root.strip(os.sep) else None


def displayed_width(width: int, sample_aspect_ratio: tuple[int, int]) -> int:
    """A stored row of `width` pixels as wide as a player shows it: width x num / den, rounded half up (704 at 16:11
    shows 1024 wide), at least 1."""
    num, den = sample_aspect_ratio
    return max(1, (2 * width * num + den) // (2 * den))


@dataclass(frozen=True)
class VideoInfo:
    """What the CPU probe learned from demuxing a video (no frame decoded)."""

    width: int  # coded width
    height: int  # coded height
    rotation: int  # degrees to rotate the coded frame counter-clockwise to show it upright (0/90/180/270)
    fps: float  # the stream's average frame rate
    pts: tuple[float, ...]  # presentation time in seconds of every frame, in presentation order
    codec: str
    pix_fmt: str
    lossless: bool  # true for codecs/containers that cannot lose information (PNG, FFV1, ...)
    # width : height of one stored pixel as a player shows it (num, den), reduced; (1, 1): square pixels
    sample_aspect_ratio: tuple[int, int] = (1, 1)

    @property
    def num_frames(self) -> int:
        return len(self.pts)

    @property
    def upright_size(self) -> tuple[int, int]:
        """(width, height) of the stored pixels with the rotation applied: the size of a decoded frame turned
        upright, which mask and depth sources match."""
        if self.rotation % 180 == 90:
            return self.height, self.width
        return self.width, self.height

    @property
    def display_size(self) -> tuple[int, int]:
        """(width, height) as a player shows the video: the sample aspect ratio stretches the stored width, then
        the rotation turns the frame."""
        width = displayed_width(self.width, self.sample_aspect_ratio)
        if self.rotation % 180 == 90:
            return self.height, width
        return width, self.height


@dataclass(frozen=True)
class Sample:
    """A candidate sample: one window of one source entry, with its place in the plan."""

    sample_id: str
    source_index: int
    entry: SourceEntry
    start_frame: int | None = None  # fixed by `windows: every N`; None lets the window policy choose


@dataclass(frozen=True)
class Reject:
    """A sample that was not cached, and why: one row of rejects.jsonl (keys in field order)."""

    sample_id: str
    source_index: int  # -1 for plan rejects, which have no place in the plan
    reason: str  # one of errors.REJECT_REASONS
    detail: str
    stage: str  # one of REJECT_STAGES

    @classmethod
    def of(cls, sample: Sample, error: SampleRejected, stage: str) -> Reject:
        """The reject of a planned sample whose `error` was raised at `stage`. Paths under the dataset folder
        are written relative to it, so the same data in another folder gives the same rejects.jsonl."""
        root = sample.entry.root
        detail = error.detail if root is None else error.detail.replace(root, "")
        return cls(sample.sample_id, sample.source_index, error.reason, detail, stage)

    @property
    def well_formed(self) -> bool:
        """Its reason and stage come from the closed lists."""
        return self.reason in REJECT_REASONS and self.stage in REJECT_STAGES

    def to_json(self) -> dict[str, Any]:
        return {
            "sample_id": self.sample_id,
            "source_index": self.source_index,
            "reason": self.reason,
            "detail": self.detail,
            "stage": self.stage,
        }

    @classmethod
    def from_json(cls, row: dict[str, Any]) -> Reject:
        """Raises KeyError/TypeError when `row` does not have exactly the row's keys."""
        if list(row) != REJECT_KEYS:
            raise KeyError(f"reject row keys {list(row)}, expected {REJECT_KEYS}")
        return cls(**row)


REJECT_KEYS = [f.name for f in fields(Reject)]
