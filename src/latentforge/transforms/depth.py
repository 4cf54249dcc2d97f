"""Depth -> [-1, 1] (docs/modalities.md): nearest-neighbour on the sample's plan (no depths invented
between foreground and background), then per-row min-max whose lo/hi are stored so it inverts:
depth = lo + (x + 1) / 2 * (hi - lo)."""

from __future__ import annotations

import math
import struct
import zipfile
from typing import Any, Iterator, cast

import numpy as np

from ..config import DepthConfig
from ..decode.modality_frames import ModalityFrames
from ..decode.resize import NearestClip, ResizeGeometry
from ..decode.sources import ModalitySource, iter_source_frames
from ..errors import SampleRejected

_ZIP_LOCAL_HEADER = 30  # bytes of a zip member's fixed local header


def source_frames(source: ModalitySource, indices: list[int], sample_id: str, from_start: bool = False
                  ) -> Iterator[tuple[int, np.ndarray]]:
    """(index, [H, W] depth values or codes in the source's own dtype) of each distinct frame of `indices`,
    ascending; array frames are views, so a memory-mapped one reads only the rows the caller touches.
    from_start: a video source is decoded from its start, never seeking."""
    if source.kind in ("npy", "npz"):
        values = _source_array(source, sample_id)
        return ((i, values[i]) for i in sorted(set(indices)))
    return iter_source_frames(source, indices, sample_id, from_start)


def _source_array(source: ModalitySource, sample_id: str) -> np.ndarray:
    """The whole [T, H, W] array: memory-mapped unless it is a compressed .npz member."""
    if source.kind == "npy":
        return np.load(source.path, mmap_mode="r")
    try:
        stored = stored_npz_member(source.path, source.array_name)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as error:  # e.g. shorter than its header says
        raise SampleRejected("unreadable", sample_id, f"depth array {source.path}: {error}") from None
    if stored is not None:
        return stored
    with np.load(source.path) as archive:
        return archive[source.array_name]


def stored_npz_member(path: str, name: str) -> np.ndarray | None:
    """Array `name` of an .npz saved without compression (np.savez) as a read-only memory map, so only the
    frames a sample uses are read (np.load reads the whole array and checks its CRC); None when the member is
    compressed. The data starts after the member's zip local header (30 bytes, then its name and extra field)
    and the .npy header."""
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(name + ".npy")
        if info.compress_type != zipfile.ZIP_STORED:
            return None
        with archive.open(info) as member:
            version = np.lib.format.read_magic(member)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                np.lib.format.read_array_header_2_0
            shape, fortran_order, dtype = read_header(member)
            array_offset = member.tell()
    with open(path, "rb") as handle:
        handle.seek(info.header_offset)
        local = handle.read(_ZIP_LOCAL_HEADER)
    if local[:4] != b"PK\x03\x04":
        return None
    name_length, extra_length = struct.unpack("<HH", local[26:30])
    start = info.header_offset + _ZIP_LOCAL_HEADER + name_length + extra_length + array_offset
    return np.memmap(path, dtype=dtype, mode="r", offset=start, shape=shape, order="F" if fortran_order else "C")


def to_units(values: np.ndarray, source: ModalitySource, depth_cfg: DepthConfig) -> np.ndarray:
    """float64 depth in the source's units after its mapping (16-bit PNG scale, video near/far)."""
    values = values.astype(np.float64)
    if source.kind in ("npy", "npz"):
        return values
    if source.kind == "png_folder":
        return values / depth_cfg.png_scale
    max_code = float((1 << (source.bit_depth or 8)) - 1)
    return depth_cfg.video_near + (depth_cfg.video_far - depth_cfg.video_near) * values / max_code


def normalize_into(depth: np.ndarray, lo: float, hi: float, out: np.ndarray) -> None:
    """out = 2 (d - lo) / (hi - lo) - 1, rounded once to out's float32; computed in place in `depth` (float64,
    the caller's), operation by operation in that order, so any split of a clip into frames gives the same
    bits. hi > lo."""
    np.subtract(depth, lo, out=depth)
    np.multiply(2.0, depth, out=depth)
    np.divide(depth, hi - lo, out=depth)
    np.subtract(depth, 1.0, out=depth)
    out[...] = depth


def load_depth(
    source: ModalitySource, indices: list[int], plan: ResizeGeometry, depth_cfg: DepthConfig, sample_id: str,
    from_start: bool = False,
) -> tuple[ModalityFrames, dict[str, Any]]:
    """float32 [T, out_h, out_w] in [-1, 1] (the encoder repeats it into 3 channels), and the row's params:
    lo and hi, the min and max over every kept pixel of the clip, a constant clip mapping to 0. from_start: a
    video source is decoded from its start, never seeking."""
    # Select the kept pixels first, then convert: the mapping is per pixel, and float64 copies of whole
    # full-resolution sources cost more than the rest of the depth path. Frame by frame, twice (min/max, then
    # normalise), so each frame's float64 values stay in cache instead of streaming clip-sized arrays.
    clip = NearestClip(plan, indices)
    lo, hi, finite = math.inf, -math.inf, True
    for index, values in source_frames(source, indices, sample_id, from_start):
        units = to_units(clip.add(index, values), source, depth_cfg)
        frame_lo, frame_hi = float(units.min()), float(units.max())
        # min and max propagate NaN and reach +-inf, so both finite means every value is
        finite = finite and math.isfinite(frame_lo) and math.isfinite(frame_hi)
        lo, hi = min(lo, frame_lo), max(hi, frame_hi)
    kept = cast(np.ndarray, clip.values)  # a source has at least one frame
    if not finite:
        _reject_not_finite(to_units(kept, source, depth_cfg), source, indices, sample_id)
    if kept.dtype.kind == "f" and 0.0 in (lo, hi):
        # Which of +0.0 and -0.0 a reduction returns depends on its order: take a zero extreme from the whole
        # clip's reduction, as the stored lo/hi always were (integer codes map to one zero only).
        whole = to_units(kept, source, depth_cfg)
        lo, hi = float(whole.min()), float(whole.max())
    # float32 frames are overwritten in place: each is read into float64 before its result is written
    normalized = kept if kept.dtype == np.float32 else np.empty(kept.shape, np.float32)
    if hi > lo:
        for t in range(len(indices)):
            normalize_into(to_units(kept[t], source, depth_cfg), lo, hi, normalized[t])
    else:
        normalized[...] = 0.0
    params = {"normalize": depth_cfg.normalize, "lo": lo, "hi": hi, "source_kind": source.kind}
    return ModalityFrames(normalized), params


def _reject_not_finite(kept: np.ndarray, source: ModalitySource, indices: list[int], sample_id: str) -> None:
    bad = ~np.isfinite(kept)
    t, y, x = (int(v) for v in np.argwhere(bad)[0])
    raise SampleRejected(
        "depth_not_finite",
        sample_id,
        f"depth {source.path} has {int(bad.sum())} non-finite values in the kept pixels (first: "
        f"{kept[t, y, x]} at source frame {indices[t]}, output pixel ({x}, {y})); fill invalid depth first",
    )
