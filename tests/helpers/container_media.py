"""Writers of tiny awkward containers, each the shape of a real file that decoded wrong or ended a build: MPEG-4 in
MPEG-TS with a long GOP, x264 with B-frames in AVI, VP9 with hidden frames in their own packets, VP9 that changes
size mid-stream, a frame rate the container states falsely, a metadata tag that is not UTF-8, an all-zero display
matrix, and x264 4:4:4 lossless whose version SEI (in its first packet only) names a build older than 151.

All are written with PyAV's encoders and muxers, byte patches where a muxer would not write the defect; never with
latentforge.
"""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from helpers.media import pattern_frames, write_video


def _encode(codec: str, frames: np.ndarray, first_pts: int = 0, gop: int | None = None, **options: str
            ) -> list[av.Packet]:
    """Packets of `frames` through a bare encoder at 24 fps (time base 1/24), frame k at first_pts + k."""
    context = av.CodecContext.create(codec, "w")
    context.width, context.height = frames.shape[2], frames.shape[1]
    context.pix_fmt = "yuv420p"
    context.time_base, context.framerate = Fraction(1, 24), Fraction(24)
    if gop is not None:
        context.gop_size = gop
    context.options = options
    packets = []
    for k, image in enumerate(frames):
        frame = av.VideoFrame.from_ndarray(image, format="rgb24").reformat(format="yuv420p")
        frame.pts, frame.time_base = first_pts + k, Fraction(1, 24)
        packets += context.encode(frame)
    return packets + context.encode(None)


def _mux(path: Path, codec: str, size: tuple[int, int], packets: list[tuple[bytes, int, bool]],
         options: dict[str, str] | None = None, time_base: Fraction = Fraction(1, 24)) -> Path:
    """(data, pts in time_base, keyframe) packets muxed as one video stream, in the order given."""
    with av.open(str(path), "w", options=options or {}) as container:
        stream = container.add_stream(codec, rate=24)
        stream.width, stream.height = size
        stream.pix_fmt = "yuv420p"
        for data, pts, key in packets:
            packet = av.Packet(data)
            packet.stream, packet.time_base = stream, time_base
            packet.pts = packet.dts = pts
            packet.is_keyframe = key
            container.mux(packet)
    return path


def mpeg4_ts_long_gop(path: Path, count: int = 72, gop: int = 36) -> Path:
    """MPEG-4 Part 2 in MPEG-TS, no B-frames: MPEG-TS has no index, so a seek lands between keyframes."""
    with av.open(str(path), "w", format="mpegts") as container:
        stream = container.add_stream("mpeg4", rate=24)
        stream.width, stream.height = 64, 48
        stream.pix_fmt = "yuv420p"
        stream.codec_context.gop_size, stream.codec_context.max_b_frames = gop, 0
        stream.codec_context.bit_rate = 400_000
        for image in pattern_frames(count, 64, 48, seed=7):
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def x264_avi_bframes(path: Path, count: int = 24) -> Path:
    """x264 with B-frames in AVI: AVI stores packets in decode order with decode-order timestamps, so the decoder
    hands out frames labelled 1, 3, 2, 5, 4, ..."""
    return write_video(path, pattern_frames(count, 64, 48, seed=8), gop=8, options={"bframes": "2"})


def vp9_hidden_frames(path: Path, count: int = 30, gop: int = 10) -> Path:
    """VP9 in WebM with a hidden frame in a packet of its own before each later keyframe (a copy of that keyframe
    with show_frame cleared): packets outnumber shown frames, as with alt-ref frames left out of superframes (the
    WebM muxer's automatic superframe filter is off so they stay separate)."""
    packets = []
    for packet in _encode("libvpx-vp9", pattern_frames(count, 64, 48, seed=9), gop=gop):
        data = bytes(packet)
        if packet.is_keyframe and packet.pts > 0:
            hidden = bytearray(data)
            assert hidden[0] & 0b1100_0000 == 0b1000_0000 and not hidden[0] & 0b0011_0000  # profile 0 header
            hidden[0] &= ~0b10  # show_frame = 0
            packets.append((bytes(hidden), packet.pts * 2 - 1, False))
        packets.append((data, packet.pts * 2, packet.is_keyframe))
    # timestamps in 1/48 s: each hidden frame sits half a frame before the keyframe it copies
    return _mux(path, "vp9", (64, 48), packets, {"fflags": "-autobsf"}, Fraction(1, 48))


def vp9_resolution_change(path: Path, count: int = 16) -> Path:
    """VP9 in WebM: `count` frames at 64x48, then `count` at 64x40 (each keyframe carries its size)."""
    first = _encode("libvpx-vp9", pattern_frames(count, 64, 48, seed=10), gop=8)
    second = _encode("libvpx-vp9", pattern_frames(count, 64, 40, seed=11), first_pts=count, gop=8)
    return _mux(path, "vp9", (64, 48), [(bytes(p), p.pts, p.is_keyframe) for p in first + second])


def false_frame_rate(path: Path, count: int = 24) -> Path:
    """30 fps H.264 whose container states 1000 fps (FLV's onMetaData framerate, MKV's default duration of 1 ms)."""
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=1000)
        stream.width, stream.height = 64, 48
        stream.pix_fmt = "yuv420p"
        stream.codec_context.time_base = Fraction(1, 1000)
        for k, image in enumerate(pattern_frames(count, 64, 48, seed=12)):
            frame = av.VideoFrame.from_ndarray(image, format="rgb24")
            frame.pts, frame.time_base = round(k * 1000 / 30), Fraction(1, 1000)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def non_utf8_tag(path: Path) -> Path:
    """An MP4 whose title tag holds the byte 0xFE (written as text by the muxer, then patched)."""
    plain = write_video(path.with_suffix(".plain.mp4"), pattern_frames(12, 64, 48, seed=13))
    with av.open(str(plain)) as source, av.open(str(path), "w") as target:
        target.metadata["title"] = "TAGTAGTAG"
        stream = target.add_stream_from_template(source.streams.video[0])
        for packet in source.demux(source.streams.video[0]):
            if packet.dts is not None:
                packet.stream = stream
                target.mux(packet)
    plain.unlink()
    data = path.read_bytes()
    assert data.count(b"TAGTAGTAG") == 1
    path.write_bytes(data.replace(b"TAGTAGTAG", b"TAG\xfe\xfeTAG\xfe"))
    return path


def zero_display_matrix(path: Path) -> Path:
    """An MP4 whose track header's display matrix is all zero (FFmpeg: no angle; PyAV's rotation reads
    -2147483648)."""
    write_video(path, pattern_frames(12, 64, 48, seed=14))
    data = bytearray(path.read_bytes())
    box = data.find(b"tkhd") - 4
    assert data[box + 8] == 0  # version 0: the matrix is 40 bytes after the box header
    data[box + 48 : box + 84] = bytes(36)
    path.write_bytes(bytes(data))
    return path


def old_x264_lossless_444(path: Path, count: int = 36, gop: int = 12) -> Path:
    """x264 4:4:4 lossless (High 4:4:4 Predictive with transform bypass) whose version SEI, which x264 writes into
    the first packet only, names core 150: FFmpeg then decodes 8x8 intra prediction the way builds before 151
    encoded it, a workaround a decoder that never saw that packet (after a seek) does not apply."""
    write_video(path, pattern_frames(count, 64, 48, seed=15), pix_fmt="yuv444p", gop=gop,
                options={"qp": "0", "crf": "0"})
    data = path.read_bytes()
    version = re.findall(rb"x264 - core \d\d\d", data)
    assert len(version) == 1
    path.write_bytes(data.replace(version[0], b"x264 - core 150"))
    return path
