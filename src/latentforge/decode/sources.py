"""Mask and depth sources: what they are, how many frames, what size; read without decoding where possible.

A source is a folder of PNGs (one per video frame, sorted by file name), a video, or (depth only) a .npz /
.npy array [T, H, W]. Sizes are the video's stored sizes with the rotation applied, frame i of a source belongs
to video frame i (presentation order), or is matched by time when its rate differs. See docs/modalities.md.
"""

from __future__ import annotations

import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, cast

import av
import numpy as np

from ..errors import SampleRejected
from ..records import VideoInfo
from .frame_reader import decode_frames
from .pyav import upright
from .stream_probe import probe_video

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_GRAY, _PNG_PALETTE = 0, 3


@dataclass(frozen=True)
class ModalitySource:
    """A probed mask or depth source."""

    modality: str  # mask | depth
    kind: str  # png_folder | video | npz | npy
    path: str
    num_frames: int
    size: tuple[int, int]  # (width, height), rotation applied
    files: tuple[str, ...] = ()  # png_folder: the frames' files in frame order
    bit_depth: int | None = None  # png_folder / video: bits per id or depth code
    video: VideoInfo | None = None  # video sources
    array_name: str | None = None  # npz: the member holding the array


def probe_modality_source(modality: str, path: str | None, sample_id: str) -> ModalitySource:
    """Describe a source without decoding its pixels; raises missing_source, unreadable, lossy_mask_source."""
    if not path:
        raise SampleRejected("missing_source", sample_id, f"the listing names no {modality} source (an empty "
                             f"{modality} cell); fill it, or drop the row or {modality!r} from modalities.names")
    if not Path(path).exists():
        raise SampleRejected(
            "missing_source", sample_id, f"{modality} source {path!r} does not exist; fix the {modality} column"
        )
    source = Path(path)
    if source.is_dir():
        return _probe_png_folder(modality, source, sample_id)
    suffix = source.suffix.lower()
    if modality == "depth" and suffix in (".npz", ".npy"):
        return _probe_array(source, suffix, sample_id)
    info = probe_video(str(source), sample_id)
    if info.size_changes:
        index, width, height = info.size_changes[0]
        raise SampleRejected("modality_mismatch", sample_id,
                             f"{modality} video {path} changes frame size mid-stream ({info.width}x{info.height}, "
                             f"then {width}x{height} from frame {index}); a {modality} source keeps one size")
    if modality == "mask" and not info.lossless:
        raise SampleRejected(
            "lossy_mask_source",
            sample_id,
            f"mask video {path} uses lossy codec {info.codec!r}; ids must be exact: store masks as PNG frames "
            "or a lossless codec (FFV1, PNG, rawvideo)",
        )
    bits = av.VideoFormat(info.pix_fmt).components[0].bits
    return ModalitySource(
        modality, "video", str(source), info.num_frames, info.upright_size, bit_depth=bits, video=info
    )


def check_matches_video(source: ModalitySource, video: VideoInfo, upright: tuple[int, int], sample_id: str,
                        by_time: bool = False) -> None:
    """Every source frame must pair with a video frame of the same size: `upright`, the stored size of the window's
    video frames turned upright (their displayed size, unless their pixels are not square). by_time: the source is
    matched to the window by time (pipeline/modality_times.py), so only its size must match."""
    width, height = upright
    if (not by_time and source.num_frames != video.num_frames) or source.size != (width, height):
        raise SampleRejected(
            "modality_mismatch",
            sample_id,
            f"{source.modality} source {source.path} has {source.num_frames} frames of {source.size[0]}x"
            f"{source.size[1]}, the video has {video.num_frames} frames of {width}x{height}; re-export the "
            f"{source.modality} to match frame for frame",
        )


def iter_source_frames(
    source: ModalitySource, indices: list[int], sample_id: str, from_start: bool = False
) -> Iterator[tuple[int, np.ndarray]]:
    """(index, raw integer plane [H, W], uint8 or uint16, upright) of each distinct frame of `indices`,
    ascending, one at a time: a caller that reduces each frame as it comes keeps it in cache and never holds
    the whole clip at full resolution. A plane may view the decoder's frame, so use it before the next.
    from_start: a video source is decoded from its start, never seeking."""
    if source.kind == "png_folder":
        for i in sorted(set(indices)):
            yield i, _read_png(source.files[i], source, sample_id)
        return
    video = cast(VideoInfo, source.video)  # kind 'video' always carries its VideoInfo
    for i, frame in decode_frames(source.path, video, indices, sample_id, from_start=from_start):
        yield i, upright(id_plane(frame, source, sample_id), video.rotation)


def id_plane(frame: av.VideoFrame, source: ModalitySource, sample_id: str) -> np.ndarray:
    """The first plane's integer codes (gray value, luma, or palette index), native uint8/uint16; a view of
    the frame's buffer (numpy keeps the frame alive) unless the codes need a byte swap."""
    fmt = frame.format
    bits = fmt.components[0].bits
    if not fmt.name.startswith(("gray", "yuv", "pal8")) or bits > 16 or fmt.name.startswith("grayf"):
        raise SampleRejected(
            "unreadable",
            sample_id,
            f"{source.modality} source {source.path} has pixel format {fmt.name!r}; store ids/depth codes as "
            "grayscale (gray, gray16) or in the luma plane",
        )
    dtype = np.dtype(np.uint8) if bits <= 8 else np.dtype(">u2" if fmt.name.endswith("be") else "<u2")
    plane = frame.planes[0]
    codes = np.frombuffer(plane, dtype).reshape(plane.height, plane.line_size // dtype.itemsize)
    return codes[:, : plane.width].astype(np.uint16 if bits > 8 else np.uint8, copy=False)


def _read_png(file: str, source: ModalitySource, sample_id: str) -> np.ndarray:
    # The whole file as one key packet to FFmpeg's PNG decoder, as av.open's demuxer hands it over: opening a
    # container also probes the stream by decoding the image once more (~2.5x the time per frame). A fresh
    # decoder per file, as before, so no state carries from one frame's file to the next.
    try:
        with open(file, "rb") as handle:
            packet = av.Packet(handle.read())
        packet.is_keyframe = True
        decoder = av.CodecContext.create("png", "r")
        frame = next(iter([*decoder.decode(packet), *decoder.decode(None)]))
    except (OSError, av.FFmpegError, StopIteration) as error:
        raise SampleRejected("decode_error", sample_id, f"{source.modality} frame {file}: {error}") from None
    codes = id_plane(frame, source, sample_id)
    if (codes.shape[1], codes.shape[0]) != source.size:
        raise SampleRejected(
            "modality_mismatch", sample_id, f"{file} is {codes.shape[1]}x{codes.shape[0]}, expected {source.size}"
        )
    return codes


def _png_header(file: Path, sample_id: str) -> tuple[int, int, int, int]:
    """(width, height, bit depth, colour type) from the IHDR chunk, which the PNG standard puts first."""
    with open(file, "rb") as handle:
        head = handle.read(29)
    if len(head) < 29 or head[:8] != _PNG_SIGNATURE or head[12:16] != b"IHDR":
        raise SampleRejected("unreadable", sample_id, f"{file} is not a PNG file")
    width, height, depth, colour = struct.unpack(">IIBB", head[16:26])
    return width, height, depth, colour


def _probe_png_folder(modality: str, folder: Path, sample_id: str) -> ModalitySource:
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() == ".png")
    if not files:
        raise SampleRejected("missing_source", sample_id, f"{modality} folder {folder} holds no .png file")
    headers = {(w, h, d, c) for w, h, d, c in (_png_header(f, sample_id) for f in files)}
    allowed_types = (_PNG_GRAY, _PNG_PALETTE) if modality == "mask" else (_PNG_GRAY,)
    bad = [h for h in headers if h[3] not in allowed_types or h[2] not in (8, 16)]
    if bad:
        raise SampleRejected(
            "unreadable",
            sample_id,
            f"{modality} PNGs in {folder} have bit depth {bad[0][2]} / colour type {bad[0][3]}; expected "
            "8- or 16-bit grayscale" + (" or 8-bit palette indices" if modality == "mask" else ""),
        )
    if len(headers) > 1:
        sizes = sorted({(w, h, d) for w, h, d, _ in headers})
        raise SampleRejected(
            "modality_mismatch", sample_id, f"{modality} PNGs in {folder} differ in size/bit depth: {sizes}"
        )
    width, height, depth, _ = headers.pop()
    return ModalitySource(
        modality, "png_folder", str(folder), len(files), (width, height), tuple(str(f) for f in files), depth
    )


def _probe_array(file: Path, suffix: str, sample_id: str) -> ModalitySource:
    """Shape and dtype from the .npy header (inside the zip for .npz); the data is not read."""
    name = None
    try:
        if suffix == ".npy":
            array = np.load(file, mmap_mode="r")
            shape, dtype = array.shape, array.dtype
        else:
            with zipfile.ZipFile(file) as archive:
                members = [m[:-4] for m in archive.namelist() if m.endswith(".npy")]
                name = "depth" if "depth" in members else members[0] if len(members) == 1 else None
                if name is None:
                    raise SampleRejected(
                        "unreadable", sample_id, f"{file} holds arrays {members}; name the depth array 'depth'"
                    )
                with archive.open(name + ".npy") as handle:
                    version = np.lib.format.read_magic(handle)
                    if version == (1, 0):
                        shape, _, dtype = np.lib.format.read_array_header_1_0(handle)
                    else:
                        shape, _, dtype = np.lib.format.read_array_header_2_0(handle)
    except (OSError, ValueError, zipfile.BadZipFile) as error:
        raise SampleRejected("unreadable", sample_id, f"depth array {file}: {error}") from None
    if len(shape) != 3 or dtype.kind not in "fiu":
        raise SampleRejected(
            "unreadable", sample_id, f"depth array {file} is {dtype} {list(shape)}; expected real numbers [T, H, W]"
        )
    kind = "npy" if suffix == ".npy" else "npz"
    return ModalitySource("depth", kind, str(file), shape[0], (shape[2], shape[1]), array_name=name)
