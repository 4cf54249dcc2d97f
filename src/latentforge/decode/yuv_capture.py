"""`frames.resize_backend: device`, the decode worker's part: each needed frame's 8-bit 4:2:0 planes at the coded
size, copied as FFmpeg produced them (yuv420p from software decoding, nv12 from NVDEC's copy-back); no swscale.
The encoder's device converts, rotates and resizes them (device_convert.py)."""

from __future__ import annotations

import av
import numpy as np

from ..config import FramesConfig
from ..errors import SampleRejected
from ..records import VideoInfo
from .frame_reader import decode_frames
from .modality_frames import ModalityFrames
from .pyav import check_planned_size, colour_tags
from .resize import ResizeGeometry
from .yuv_format import YuvFormat

# FFmpeg pixel format -> how its planes are laid out in a frame's bytes (records.YUV_LAYOUTS).
PLANE_LAYOUTS = {"yuv420p": "i420", "yuvj420p": "i420", "nv12": "nv12"}


def check_yuv_source(pix_fmt: str, width: int, height: int, path: str, sample_id: str) -> None:
    """Reject a source the device cannot convert as swscale would: pixels that are not 8-bit 4:2:0, or an odd
    coded size (swscale samples the chroma of those on another grid), naming the value and the fix."""
    fix = "use frames.resize_backend=swscale (or torch) for such sources"
    if pix_fmt not in PLANE_LAYOUTS:
        raise SampleRejected("decode_error", sample_id,
                             f"{path}: pixel format {pix_fmt} is not 8-bit YUV 4:2:0 ({', '.join(PLANE_LAYOUTS)}), "
                             f"which frames.resize_backend=device needs; {fix}")
    if width % 2 or height % 2:
        raise SampleRejected("decode_error", sample_id,
                             f"{path}: coded size {width}x{height} is odd, and frames.resize_backend=device takes "
                             f"even sizes only; {fix}")


def yuv_format(frame: av.VideoFrame, info: VideoInfo, plan: ResizeGeometry, frames_cfg: FramesConfig) -> YuvFormat:
    """How the device turns this frame's planes into the output frame: its own colour tags (colour_tags, as
    to_rgb24 converts), the video's rotation, the plan's scaled size and crop."""
    matrix, full_range = colour_tags(frame)
    return YuvFormat(
        layout=PLANE_LAYOUTS[frame.format.name], width=frame.width, height=frame.height, matrix=matrix,
        full_range=full_range, rotation=info.rotation, scaled_size=(plan.scaled_w, plan.scaled_h), crop=plan.crop,
        resize_filter=frames_cfg.resize_filter,
    )


def _plane_rows(plane: av.video.plane.VideoPlane, rows: int, row_bytes: int) -> np.ndarray:
    """The plane's pixels as uint8 [rows, row_bytes], a view without its line padding."""
    return np.frombuffer(plane, np.uint8).reshape(-1, plane.line_size)[:rows, :row_bytes]


def copy_planes(frame: av.VideoFrame, fmt: YuvFormat, out: np.ndarray) -> None:
    """Copy the frame's planes into `out`, uint8 [fmt.frame_bytes]: Y rows, then U rows and V rows (i420) or
    interleaved UV rows (nv12), each without padding."""
    width, height = fmt.width, fmt.height
    chroma_w, chroma_h = fmt.chroma_size
    luma = width * height
    out[:luma].reshape(height, width)[...] = _plane_rows(frame.planes[0], height, width)
    if fmt.layout == "nv12":
        out[luma:].reshape(chroma_h, 2 * chroma_w)[...] = _plane_rows(frame.planes[1], chroma_h, 2 * chroma_w)
        return
    chroma = chroma_w * chroma_h
    for k, start in ((1, luma), (2, luma + chroma)):
        out[start : start + chroma].reshape(chroma_h, chroma_w)[...] = _plane_rows(frame.planes[k], chroma_h, chroma_w)


def decode_yuv(
    path: str, info: VideoInfo, indices: list[int], plan: ResizeGeometry, frames_cfg: FramesConfig, sample_id: str,
    hwaccel=None, threads: int = 0, from_start: bool = False,
) -> ModalityFrames:
    """uint8 [T, frame_bytes] YUV frames for the source frames `indices` (repeats allowed), with their YuvFormat.
    Every frame must have the stored size the window was planned for and share the first one's format and colour
    tags (what the device converts them with). from_start: decode from the stream's start, never seeking."""
    fmt: YuvFormat | None = None
    values: np.ndarray | None = None
    positions: dict[int, list[int]] = {}
    for t, index in enumerate(indices):
        positions.setdefault(index, []).append(t)
    for index, frame in decode_frames(path, info, indices, sample_id, hwaccel, threads, from_start):
        check_planned_size(frame, index, info, plan, path, sample_id)
        check_yuv_source(frame.format.name, frame.width, frame.height, path, sample_id)
        frame_fmt = yuv_format(frame, info, plan, frames_cfg)
        if fmt is None:
            fmt, values = frame_fmt, np.empty((len(indices), frame_fmt.frame_bytes), np.uint8)
        elif frame_fmt != fmt:
            raise SampleRejected(
                "decode_error", sample_id,
                f"{path}: frame {index} is {frame_fmt} but the first needed frame {fmt}; frames.resize_backend="
                "device converts a clip with one format, use frames.resize_backend=swscale for this source",
            )
        first, *repeats = positions[index]
        copy_planes(frame, fmt, values[first])
        for t in repeats:
            values[t] = values[first]
    return ModalityFrames(values, yuv=fmt)
