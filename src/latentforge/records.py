"""Records passed between the stages of the flow: reader -> plan -> probe -> decode -> encode -> stage.

`Reject` is also the row type of a cache's rejects.jsonl.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from .errors import REJECT_REASONS
from .packed_numbers import PackedFloats

if TYPE_CHECKING:
    from .errors import SampleRejected

# A stream is variable-frame-rate when a frame's duration (the gap to the next frame's time) differs from the median
# duration by more than this share of it and by more than VFR_MIN_SECONDS (1 ms: the coarsest time base of common
# containers, MKV's, rounds a 30 fps stream's durations to 33 and 34 ms).
VFR_TOLERANCE = 0.1
VFR_MIN_SECONDS = 0.001
# Where in the flow a sample was rejected, in flow order.
REJECT_STAGES = ("plan", "probe", "decode", "encode")


@dataclass(frozen=True, slots=True)
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
    # a table row's segment of its video (dataset.start_column/end_column): {"start", "end", "unit": seconds |
    # frames}, [start, end) with None for the video's start or end; None: the whole video (pipeline/segments.py)
    segment: dict[str, Any] | None = None
    # per-frame side streams (dataset.side_columns): {stream name: its .npy or .parquet file}; None: an empty cell
    side: dict[str, str | None] = field(default_factory=dict)
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


@dataclass(frozen=True, slots=True)
class VideoInfo:
    """What the CPU probe learned from decoding a video: the pictures its decoder shows, in the order it shows them
    (presentation order), and how a player shows them."""

    width: int  # coded width of frame 0
    height: int  # coded height of frame 0
    rotation: int  # degrees to rotate the coded frame counter-clockwise to show it upright (0/90/180/270)
    fps: float  # the stream's average frame rate, or the shown frames' rate where the two disagree
    pts: Sequence[float]  # presentation time in seconds of every shown frame, in presentation order (packed)
    codec: str
    pix_fmt: str
    lossless: bool  # true for codecs/containers that cannot lose information (PNG, FFV1, ...)
    # width : height of one stored pixel as a player shows it (num, den), reduced; (1, 1): square pixels
    sample_aspect_ratio: tuple[int, int] = (1, 1)
    # Per shown frame, what a decode needs to find and prove it (decode/frame_reader.py), packed (a long video's
    # probe is held for each of its samples until the build ends):
    ticks: bytes = b""  # the timestamp the decoder gave it in stream time-base ticks, int64 little-endian
    keyframes: tuple[int, ...] = ()  # indices of the frames the decoder flagged as keyframes, ascending
    digests: bytes = b""  # CRC-32 of each frame's decoded planes, 4 bytes a frame; empty: none could be taken
    # (first frame index, coded width, coded height) of every mid-stream change of the frame size
    size_changes: tuple[tuple[int, int, int], ...] = ()
    notes: tuple[str, ...] = ()  # what the probe read differently from what the file says, for the rows

    def __post_init__(self) -> None:
        if not isinstance(self.pts, PackedFloats):
            object.__setattr__(self, "pts", PackedFloats(self.pts))

    @property
    def num_frames(self) -> int:
        return len(self.pts)

    @property
    def frame_ticks(self) -> list[int]:
        """`ticks` unpacked: frame i's decoder timestamp."""
        return [tick for (tick,) in struct.iter_unpack("<q", self.ticks)]

    @property
    def seekable(self) -> bool:
        """Every shown frame has its own timestamp, so a frame decoded after a seek is known by it."""
        ticks = self.frame_ticks
        return len(ticks) == self.num_frames and len(set(ticks)) == len(ticks)

    def coded_size(self, index: int) -> tuple[int, int]:
        """(width, height) of frame `index` as decoded."""
        size = (self.width, self.height)
        for first, width, height in self.size_changes:
            if first > index:
                break
            size = (width, height)
        return size

    def coded_sizes(self, indices: Iterable[int]) -> list[tuple[int, int]]:
        """The distinct decoded sizes of the frames `indices`, in the order they first appear."""
        return list(dict.fromkeys(self.coded_size(i) for i in indices))

    def upright_of(self, coded: tuple[int, int]) -> tuple[int, int]:
        """(width, height) of a stored frame of the coded size with the rotation applied: what a decoded frame
        turned upright measures, and what mask and depth sources match."""
        return (coded[1], coded[0]) if self.rotation % 180 == 90 else coded

    def display_of(self, coded: tuple[int, int]) -> tuple[int, int]:
        """(width, height) a player shows a frame of the coded size at: the sample aspect ratio stretches the stored
        width, then the rotation turns the frame."""
        return self.upright_of((displayed_width(coded[0], self.sample_aspect_ratio), coded[1]))

    @property
    def upright_size(self) -> tuple[int, int]:
        """upright_of frame 0's size."""
        return self.upright_of((self.width, self.height))

    @property
    def display_size(self) -> tuple[int, int]:
        """display_of frame 0's size."""
        return self.display_of((self.width, self.height))

    @property
    def vfr(self) -> bool:
        """Variable frame rate: some frame's duration differs from the median duration by more than VFR_TOLERANCE
        of it and more than VFR_MIN_SECONDS. Frames are chosen by time either way; this only flags the source."""
        durations = sorted(b - a for a, b in zip(self.pts, self.pts[1:]))
        if len(durations) < 2:
            return False
        median = durations[len(durations) // 2]
        spread = max(median - durations[0], durations[-1] - median)
        return spread > max(VFR_TOLERANCE * median, VFR_MIN_SECONDS)


@dataclass(frozen=True, slots=True)
class Sample:
    """A candidate sample: one window of one source entry, with its place in the plan."""

    sample_id: str
    source_index: int
    entry: SourceEntry
    start_frame: int | None = None  # fixed by `windows: every N`; None lets the window policy choose
    # with segments: the shot or table segment the window lies in and its quality scores (pipeline/segments.py)
    segment: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
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
