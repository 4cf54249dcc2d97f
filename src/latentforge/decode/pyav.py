"""A window's frames as RGB with PyAV (FFmpeg): colour, rotation and resize of the frames frame_reader.py decodes.

Conventions (docs/frames.md): colour comes from each frame's matrix/range tags (untagged = BT.601 limited,
swscale's default); rotation metadata is applied so frames are upright; swscale runs bit-exact so the pixels do not
depend on the CPU's SIMD features; a frame must have the stored size its window was planned for.
"""

from __future__ import annotations

import av
import numpy as np
import torch
import torch.nn.functional as F
from av.video.reformatter import ColorRange, Colorspace, Interpolation

from ..config import FramesConfig
from ..errors import SampleRejected
from ..records import VideoInfo
from .frame_reader import decode_frames
from .resize import ResizeGeometry

# Accurate rounding and full chroma interpolation for quality, bit-exact for the same output on every CPU.
SWSCALE_FLAGS = Interpolation.ACCURATE_RND | Interpolation.FULL_CHR_H_INT | Interpolation.BITEXACT
SWSCALE_FILTERS = {
    "bilinear": Interpolation.BILINEAR,
    "bicubic": Interpolation.BICUBIC,
    "area": Interpolation.AREA,
    "lanczos": Interpolation.LANCZOS,
}
# AVColorSpace tag -> matrix (yuv_format.COLOUR_MATRICES). Untagged or unknown -> BT.601, as swscale and players
# default.
_MATRICES = {1: "bt709", 4: "fcc", 7: "smpte240m", 9: "bt2020", 10: "bt2020"}
SWSCALE_MATRICES = {
    "bt601": Colorspace.ITU601,
    "bt709": Colorspace.ITU709,
    "fcc": Colorspace.FCC,
    "smpte240m": Colorspace.SMPTE240M,
    "bt2020": Colorspace.BT2020,
}
_AVCOL_RANGE_JPEG = 2


def colour_tags(frame: av.VideoFrame) -> tuple[str, bool]:
    """(matrix, full range) the frame's pixels are converted with: its own tags, untagged = BT.601 limited."""
    return _MATRICES.get(frame.colorspace, "bt601"), frame.color_range == _AVCOL_RANGE_JPEG


def to_rgb24(
    frame: av.VideoFrame, width: int | None = None, height: int | None = None, filter_name: str = "bicubic",
    threads: int = 0,
) -> np.ndarray:
    """The frame as full-range RGB (coded orientation), converted with its own colour tags. threads: swscale's
    (0: one per core, which on a many-core host costs several times the CPU of one thread); the pixels do not
    depend on it."""
    matrix, full_range = colour_tags(frame)
    converted = frame.reformat(
        width=width,
        height=height,
        format="rgb24",
        src_colorspace=SWSCALE_MATRICES[matrix],
        src_color_range=ColorRange.JPEG if full_range else ColorRange.MPEG,
        dst_color_range=ColorRange.JPEG,
        interpolation=SWSCALE_FILTERS[filter_name] | SWSCALE_FLAGS,
        threads=threads,
    )
    return converted.to_ndarray()


def upright(image: np.ndarray, rotation: int) -> np.ndarray:
    """Rotate a coded [H, W, ...] image counter-clockwise by `rotation` degrees, as a player shows it."""
    return np.ascontiguousarray(np.rot90(image, k=(rotation // 90) % 4))


def torch_resize(rgb: np.ndarray, plan: ResizeGeometry, filter_name: str) -> np.ndarray:
    """uint8 [H, W, 3] -> uint8 [scaled_h, scaled_w, 3] with torch; antialiased when either axis shrinks."""
    image = torch.from_numpy(rgb).permute(2, 0, 1)[None].float()
    size = (plan.scaled_h, plan.scaled_w)
    if filter_name == "area":
        out = F.interpolate(image, size=size, mode="area")
    else:
        shrinks = plan.scaled_w < rgb.shape[1] or plan.scaled_h < rgb.shape[0]
        out = F.interpolate(image, size=size, mode=filter_name, align_corners=False, antialias=shrinks)
    return out.round().clamp(0, 255).to(torch.uint8)[0].permute(1, 2, 0).numpy()


def frame_to_output(frame: av.VideoFrame, info: VideoInfo, plan: ResizeGeometry, frames_cfg: FramesConfig,
                    threads: int = 0) -> np.ndarray:
    """One decoded frame -> uint8 [out_h, out_w, 3]: colour, upright, resize per backend, crop."""
    if frames_cfg.resize_backend == "swscale":
        coded_w, coded_h = (plan.scaled_h, plan.scaled_w) if info.rotation % 180 else (plan.scaled_w, plan.scaled_h)
        scaled = upright(to_rgb24(frame, coded_w, coded_h, frames_cfg.resize_filter, threads), info.rotation)
    else:
        scaled = torch_resize(upright(to_rgb24(frame, threads=threads), info.rotation), plan, frames_cfg.resize_filter)
    x0, y0, x1, y1 = plan.crop
    return np.ascontiguousarray(scaled[y0:y1, x0:x1])


def check_planned_size(frame: av.VideoFrame, index: int, info: VideoInfo, plan: ResizeGeometry, path: str,
                       sample_id: str) -> None:
    """A frame of another stored size than the window was planned for would be stretched: reject instead."""
    upright = info.upright_of((frame.width, frame.height))
    if upright != (plan.stored_w, plan.stored_h):
        raise SampleRejected(
            "resolution_change", sample_id,
            f"{path}: frame {index} is {upright[0]}x{upright[1]} (rotation applied), but the window was planned for "
            f"{plan.stored_w}x{plan.stored_h} frames; choose a window within one frame size, or re-encode the "
            "video at one size")


def decode_rgb(
    path: str, info: VideoInfo, indices: list[int], plan: ResizeGeometry, frames_cfg: FramesConfig, sample_id: str,
    hwaccel=None, threads: int = 0, from_start: bool = False,
) -> np.ndarray:
    """uint8 [T, out_h, out_w, 3] for the source frames `indices` (repeats allowed). threads: FFmpeg's, for
    decoding and for swscale (0: FFmpeg's choice); from_start: decode from the stream's start, never seeking."""
    converted = {}
    for i, frame in decode_frames(path, info, indices, sample_id, hwaccel, threads, from_start):
        check_planned_size(frame, i, info, plan, path, sample_id)
        converted[i] = frame_to_output(frame, info, plan, frames_cfg, threads)
    return np.stack([converted[i] for i in indices])
