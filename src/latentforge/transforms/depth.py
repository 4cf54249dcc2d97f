"""Depth -> [-1, 1] (docs/modalities.md): nearest-neighbour on the sample's plan (no depths invented
between foreground and background), then per-row min-max whose lo/hi are stored so it inverts:
depth = lo + (x + 1) / 2 * (hi - lo)."""

from __future__ import annotations

import struct
import zipfile
from typing import Any

import numpy as np

from ..config import DepthConfig
from ..decode.resize import ResizePlan, resize_nearest
from ..decode.sources import ModalitySource, read_source_frames
from ..errors import SampleRejected
from ..records import ModalityFrames

_ZIP_LOCAL_HEADER = 30  # bytes of a zip member's fixed local header


def source_values(source: ModalitySource, indices: list[int], sample_id: str) -> np.ndarray:
    """[T, H, W] depth values or codes of the source frames `indices`, in the source's own dtype."""
    if source.kind == "npy":
        return np.take(np.load(source.path, mmap_mode="r"), indices, axis=0)
    if source.kind == "npz":
        try:
            stored = stored_npz_member(source.path, source.array_name)
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as error:  # e.g. shorter than its header says
            raise SampleRejected("unreadable", sample_id, f"depth array {source.path}: {error}") from None
        if stored is not None:
            return np.take(stored, indices, axis=0)
        with np.load(source.path) as archive:
            return np.take(archive[source.array_name], indices, axis=0)
    frames = read_source_frames(source, indices, sample_id)
    return np.stack([frames[i] for i in indices])


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


def normalize_minmax(depth: np.ndarray) -> tuple[np.ndarray, float, float]:
    """x = 2 (d - lo) / (hi - lo) - 1 with lo, hi the row's min and max; a constant row maps to 0.
    Computed in place in `depth` (float64, the caller's), operation by operation in that order."""
    lo, hi = float(depth.min()), float(depth.max())
    if hi > lo:
        np.subtract(depth, lo, out=depth)
        np.multiply(2.0, depth, out=depth)
        np.divide(depth, hi - lo, out=depth)
        np.subtract(depth, 1.0, out=depth)
        return depth.astype(np.float32), lo, hi
    return np.zeros(depth.shape, np.float32), lo, hi


def load_depth(
    source: ModalitySource, indices: list[int], plan: ResizePlan, depth_cfg: DepthConfig, sample_id: str
) -> tuple[ModalityFrames, dict[str, Any]]:
    """float32 [T, out_h, out_w] in [-1, 1] (the encoder repeats it into 3 channels), and the row's params."""
    # Select the kept pixels first, then convert: the mapping is per pixel, and float64 copies of whole
    # full-resolution sources cost more than the rest of the depth path.
    kept = to_units(resize_nearest(source_values(source, indices, sample_id), plan), source, depth_cfg)
    bad = ~np.isfinite(kept)
    if bad.any():
        t, y, x = (int(v) for v in np.argwhere(bad)[0])
        raise SampleRejected(
            "depth_not_finite",
            sample_id,
            f"depth {source.path} has {int(bad.sum())} non-finite values in the kept pixels (first: "
            f"{kept[t, y, x]} at source frame {indices[t]}, output pixel ({x}, {y})); fill invalid depth first",
        )
    normalized, lo, hi = normalize_minmax(kept)
    params = {"normalize": depth_cfg.normalize, "lo": lo, "hi": hi, "source_kind": source.kind}
    return ModalityFrames(normalized), params
