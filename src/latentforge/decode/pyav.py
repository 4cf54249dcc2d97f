"""Probe and decode videos with PyAV (FFmpeg): timestamps, rotation, colour tags, windowed decoding.

Conventions (docs/frames.md): frames are numbered in presentation order; colour comes from each frame's
matrix/range tags (untagged = BT.601 limited, swscale's default); rotation metadata is applied so frames are
upright; swscale runs bit-exact so the pixels do not depend on the CPU's SIMD features.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import av
import numpy as np
import torch
import torch.nn.functional as F
from av.video.reformatter import ColorRange, Colorspace, Interpolation

from ..config import FramesConfig
from ..errors import SampleRejected
from ..records import VideoInfo
from .resize import ResizePlan

# Codecs that cannot lose information; a mask video must use one of them.
LOSSLESS_CODECS = frozenset(
    {"ffv1", "png", "apng", "rawvideo", "huffyuv", "ffvhuff", "utvideo", "magicyuv", "qtrle", "tiff", "zlib"}
)
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


def _time(ticks: int, time_base) -> float:
    # One conversion used by probe and decode, so a decoded frame's time matches the probed pts exactly.
    return float(ticks * time_base)


def _open(path: str, sample_id: str, hwaccel=None):
    try:
        return av.open(path, hwaccel=hwaccel) if hwaccel is not None else av.open(path)
    except av.FFmpegError as error:
        raise SampleRejected("unreadable", sample_id, f"{path}: FFmpeg cannot open it ({error})") from None


def probe_video(path: str, sample_id: str) -> VideoInfo:
    """Demux every packet for the presentation timestamps; decode only the first frame (rotation lives in
    its display-matrix side data). Raises SampleRejected('missing_source' | 'unreadable')."""
    file = Path(path)
    if not file.exists():
        raise SampleRejected("missing_source", sample_id, f"video {path} does not exist; fix the listing")
    if not file.is_file() or file.stat().st_size == 0:
        raise SampleRejected("unreadable", sample_id, f"{path} is empty or not a file; re-export the clip")
    container = _open(str(file), sample_id)
    with container:
        if not container.streams.video:
            raise SampleRejected("unreadable", sample_id, f"{path} has no video stream")
        stream = container.streams.video[0]
        ticks: list[int] = []
        first = None
        try:
            for packet in container.demux(stream):
                if packet.is_corrupt:
                    # A short read: the file ends inside this packet, so frames its index lists are gone.
                    raise SampleRejected("unreadable", sample_id, f"{path}: the file ends inside a video packet "
                                         f"(cut short, e.g. an interrupted download); re-download or re-export it")
                if packet.size == 0 or packet.is_discard:
                    continue
                tick = packet.pts if packet.pts is not None else packet.dts
                if tick is None:
                    raise SampleRejected("unreadable", sample_id, f"{path}: packet without timestamp; remux it")
                ticks.append(tick)
                if first is None:
                    first = next(iter(stream.decode(packet)), None)
            if first is None:
                first = next(iter(stream.decode(None)), None)
        except av.FFmpegError as error:
            raise SampleRejected("unreadable", sample_id, f"{path}: demux/decode failed ({error})") from None
        if first is None:
            raise SampleRejected("unreadable", sample_id, f"{path}: no frame could be decoded")
        rotation = first.rotation % 360
        if rotation % 90:
            raise SampleRejected("unreadable", sample_id, f"{path}: rotation {rotation} is not a multiple of 90")
        ctx = stream.codec_context
        pts = tuple(sorted(_time(t, stream.time_base) for t in ticks))
        rate = stream.average_rate
        fps = float(rate) if rate else (len(pts) - 1) / (pts[-1] - pts[0]) if len(pts) > 1 else 0.0
        return VideoInfo(
            width=ctx.width or first.width,
            height=ctx.height or first.height,
            rotation=rotation,
            fps=fps,
            pts=pts,
            codec=ctx.name,
            pix_fmt=ctx.pix_fmt or first.format.name,
            lossless=ctx.name in LOSSLESS_CODECS,
            sample_aspect_ratio=sample_aspect_ratio(stream),
        )


def sample_aspect_ratio(stream) -> tuple[int, int]:
    """(num, den) of the stream's sample aspect ratio: the container's (e.g. MP4 pasp), else the codec's (e.g.
    H.264 VUI), else square pixels; an unset (0) ratio counts as absent."""
    for ratio in (stream.sample_aspect_ratio, stream.codec_context.sample_aspect_ratio):
        if ratio is not None and ratio > 0:
            return ratio.numerator, ratio.denominator
    return 1, 1


def decode_frames(
    path: str, info: VideoInfo, indices: list[int], sample_id: str, hwaccel=None, threads: int = 0
) -> Iterator[tuple[int, av.VideoFrame]]:
    """Yield (index, frame) once per distinct needed index, ascending. Seeks to the keyframe at or before the
    first needed frame and stops after the last one, so a window decodes only its own stretch of the clip.
    threads: FFmpeg decoding threads (0: FFmpeg's choice); decoded pixels do not depend on it."""
    needed = sorted(set(indices))
    by_time = {info.pts[i]: i for i in needed}
    first_t, last_t = info.pts[needed[0]], info.pts[needed[-1]]
    found: set[int] = set()
    # The seek can land after the first needed frame (demuxers index by dts); then decode from the start.
    for seek in (True, False) if first_t > info.pts[0] else (False,):
        container = _open(path, sample_id, hwaccel)
        with container:
            stream = container.streams.video[0]
            if threads:
                stream.codec_context.thread_count = threads
            try:
                if seek:
                    tb = stream.time_base
                    target = round(first_t * tb.denominator / tb.numerator)
                    container.seek(target, stream=stream, backward=True, any_frame=False)
                for frame in _frames(container, stream):
                    if frame.pts is None:
                        raise SampleRejected("decode_error", sample_id, f"{path}: decoded frame without pts")
                    t = _time(frame.pts, stream.time_base)
                    if not found and t > first_t:
                        break  # overshot: retry without seeking
                    index = by_time.get(t)
                    if index is not None and index not in found:
                        found.add(index)
                        yield index, frame
                    if t >= last_t:
                        break
            except av.FFmpegError as error:
                raise SampleRejected("decode_error", sample_id, f"{path}: {error}") from None
        if found:
            break
    missing = [i for i in needed if i not in found]
    if missing:
        raise SampleRejected(
            "decode_error", sample_id, f"{path}: frames {missing[:5]} (of {len(missing)} missing) did not decode"
        )


def _frames(container, stream) -> Iterator[av.VideoFrame]:
    for packet in container.demux(stream):
        yield from stream.decode(packet)  # the final empty packet flushes the decoder


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


def torch_resize(rgb: np.ndarray, plan: ResizePlan, filter_name: str) -> np.ndarray:
    """uint8 [H, W, 3] -> uint8 [scaled_h, scaled_w, 3] with torch; antialiased when either axis shrinks."""
    image = torch.from_numpy(rgb).permute(2, 0, 1)[None].float()
    size = (plan.scaled_h, plan.scaled_w)
    if filter_name == "area":
        out = F.interpolate(image, size=size, mode="area")
    else:
        shrinks = plan.scaled_w < rgb.shape[1] or plan.scaled_h < rgb.shape[0]
        out = F.interpolate(image, size=size, mode=filter_name, align_corners=False, antialias=shrinks)
    return out.round().clamp(0, 255).to(torch.uint8)[0].permute(1, 2, 0).numpy()


def frame_to_output(frame: av.VideoFrame, info: VideoInfo, plan: ResizePlan, frames_cfg: FramesConfig,
                    threads: int = 0) -> np.ndarray:
    """One decoded frame -> uint8 [out_h, out_w, 3]: colour, upright, resize per backend, crop."""
    if frames_cfg.resize_backend == "swscale":
        coded_w, coded_h = (plan.scaled_h, plan.scaled_w) if info.rotation % 180 else (plan.scaled_w, plan.scaled_h)
        scaled = upright(to_rgb24(frame, coded_w, coded_h, frames_cfg.resize_filter, threads), info.rotation)
    else:
        scaled = torch_resize(upright(to_rgb24(frame, threads=threads), info.rotation), plan, frames_cfg.resize_filter)
    x0, y0, x1, y1 = plan.crop
    return np.ascontiguousarray(scaled[y0:y1, x0:x1])


def decode_rgb(
    path: str, info: VideoInfo, indices: list[int], plan: ResizePlan, frames_cfg: FramesConfig, sample_id: str,
    hwaccel=None, threads: int = 0,
) -> np.ndarray:
    """uint8 [T, out_h, out_w, 3] for the source frames `indices` (repeats allowed). threads: FFmpeg's, for
    decoding and for swscale (0: FFmpeg's choice)."""
    frames = decode_frames(path, info, indices, sample_id, hwaccel, threads)
    converted = {i: frame_to_output(frame, info, plan, frames_cfg, threads) for i, frame in frames}
    return np.stack([converted[i] for i in indices])
