"""Records passed between the stages of the flow: reader -> plan -> probe -> decode -> encode -> stage.

`Reject` is also the row type of a cache's rejects.jsonl.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

import numpy as np

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

    @property
    def root(self) -> str | None:
        """The dataset folder the relative paths start from ("<root>/" + video_rel is the video), or None when
        the listing gave the video by an absolute path."""
        if os.path.isabs(self.video_rel) or not self.video.endswith(os.sep + self.video_rel):
            return None
        root = self.video[: -len(self.video_rel)]
        return root if root.strip(os.sep) else None


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

    @property
    def num_frames(self) -> int:
        return len(self.pts)

    @property
    def display_size(self) -> tuple[int, int]:
        """(width, height) as a player shows the video."""
        if self.rotation % 180 == 90:
            return self.height, self.width
        return self.width, self.height


@dataclass(frozen=True)
class Sample:
    """A candidate sample: one window of one source entry, with its place in the plan."""

    sample_id: str
    source_index: int
    entry: SourceEntry
    start_frame: int | None = None  # fixed by `windows: every N`; None lets the window policy choose


YUV_LAYOUTS = ("i420", "nv12")  # planes Y, U, V | plane Y, then U and V interleaved (NVDEC's copy-back)
COLOUR_MATRICES = ("bt601", "bt709", "fcc", "smpte240m", "bt2020")


@dataclass(frozen=True)
class YuvFormat:
    """How one sample's 8-bit 4:2:0 frames (`frames.resize_backend: device`) become its RGB frames on the device:
    convert at the coded size with `matrix` and range, rotate, resize to `scaled_size`, keep `crop`."""

    layout: str  # one of YUV_LAYOUTS
    width: int  # coded size, even; chroma planes are height / 2 x width / 2
    height: int
    matrix: str  # one of COLOUR_MATRICES
    full_range: bool  # false: limited (16..235 luma)
    rotation: int  # degrees counter-clockwise to show the frame upright (0/90/180/270)
    scaled_size: tuple[int, int]  # (w, h) of the upright frame after the resize
    crop: tuple[int, int, int, int]  # x0, y0, x1, y1 in scaled pixels (x1, y1 exclusive)
    resize_filter: str  # bilinear | bicubic | area: torch's interpolate mode

    @property
    def chroma_size(self) -> tuple[int, int]:
        """(w, h) of each chroma plane."""
        return self.width // 2, self.height // 2

    @property
    def frame_bytes(self) -> int:
        chroma_w, chroma_h = self.chroma_size
        return self.width * self.height + 2 * chroma_w * chroma_h

    @property
    def out_size(self) -> tuple[int, int]:
        """(w, h) of the output frames."""
        x0, y0, x1, y1 = self.crop
        return x1 - x0, y1 - y0


@dataclass(frozen=True)
class ModalityFrames:
    """One modality's frames in the compact form decode produces; the encoder's device expands them exactly.

    `values` is one of:
    - [T, H, W, 3] uint8 (mapped to [-1, 1] by the 256-entry pixel table) or float32 already in [-1, 1];
    - [T, H, W] uint8/uint16 ids with `palette`, uint8 [N, 3]: frame pixel = palette[id] (masks);
    - [T, H, W] float32 in [-1, 1] without a palette: the value repeated in 3 channels (depth);
    - [T, yuv.frame_bytes] uint8 with `yuv`: each frame's YUV 4:2:0 planes at the source's coded size, converted,
      rotated and resized on the device (decode/device_convert.py).
    The compact forms carry a third (masks, depth) of the bytes from decode workers to the device; the YUV form
    half of the source's RGB, which moves the colour conversion and resize off the decode workers' CPU.
    """

    values: np.ndarray
    palette: np.ndarray | None = None
    yuv: YuvFormat | None = None

    def __post_init__(self) -> None:
        if self.yuv is not None:
            expected = (self.yuv.frame_bytes,)
            if self.values.ndim != 2 or self.values.dtype != np.uint8 or self.values.shape[1:] != expected:
                raise ValueError(f"YUV frames must be uint8 [T, {self.yuv.frame_bytes}], got "
                                 f"{self.values.dtype} {self.values.shape}")
            if self.palette is not None:
                raise ValueError("YUV frames have no palette")
            return
        compact = self.values.ndim == 3
        if not compact and (self.values.ndim != 4 or self.values.shape[-1] != 3):
            raise ValueError(f"frames must be [T, H, W, 3] or [T, H, W], got {self.values.shape}")
        if self.palette is not None and not (compact and self.values.dtype in (np.uint8, np.uint16)):
            raise ValueError("a palette goes with [T, H, W] uint8/uint16 ids")
        if compact and self.palette is None and self.values.dtype != np.float32:
            raise ValueError(f"[T, H, W] frames without a palette must be float32, got {self.values.dtype}")

    @property
    def num_frames(self) -> int:
        return int(self.values.shape[0])

    @property
    def nbytes(self) -> int:
        return int(self.values.nbytes)

    def head(self, count: int) -> ModalityFrames:
        """The first `count` frames."""
        return ModalityFrames(self.values[:count], self.palette, self.yuv)

    def with_values(self, values: np.ndarray) -> ModalityFrames:
        """The same frames held in another array (a shared-memory copy)."""
        return ModalityFrames(values, self.palette, self.yuv)

    def expanded(self) -> np.ndarray:
        """[T, H, W, 3]: uint8 colours or float32 values, as the tokenizer sees them before the pixel table.
        YUV frames are expanded by the device conversion only (tokenizers.base.frames_to_input)."""
        if self.yuv is not None:
            raise TypeError("YUV frames are converted on the device: use tokenizers.base.frames_to_input")
        if self.palette is not None:
            return np.take(self.palette, self.values, axis=0)
        if self.values.ndim == 3:
            return np.repeat(self.values[..., None], 3, axis=-1)
        return self.values


@dataclass
class SamplePixels:
    """Decoded, transformed frames of every modality of a sample, ready for the tokenizer."""

    sample: Sample
    modalities: dict[str, ModalityFrames]
    provenance: dict[str, Any]  # frame indices, timestamps, source fps and size, crop box, per-modality params


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
