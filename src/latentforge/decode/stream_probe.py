"""The probe of one video (docs/frames.md): decode it from the start and list every picture the decoder shows.

A frame is a picture the decoder shows. Packets are not frames: a hidden frame (a VP9 alt-ref) fills a packet and
shows nothing, and an AVI labels packets in decode order. So frame i is the i-th picture out of the decoder (its
output order is presentation order), and its time is the i-th smallest of the shown pictures' timestamps. For each
one the probe keeps what a later decode needs to find and prove it: its timestamp, whether it is a keyframe, its
size and a digest of its pixels. The file's claims are checked against what it shows: a frame rate the
timestamps contradict loses to them, a degenerate display matrix means no rotation, tags that are not UTF-8 are
read with U+FFFD; each is said in the info's notes. One decode per file and process: the windows of one video and
the plan's window starts share it.
"""

from __future__ import annotations

import functools
import struct
from pathlib import Path

import av
from av.sidedata.sidedata import Type as SideDataType

from ..errors import SampleRejected
from ..records import VideoInfo
from .container import open_video, replaced_tags, seconds
from .frame_digest import frame_digest

# Codecs that cannot lose information; a mask video must use one of them.
LOSSLESS_CODECS = frozenset(
    {"ffv1", "png", "apng", "rawvideo", "huffyuv", "ffvhuff", "utvideo", "magicyuv", "qtrle", "tiff", "zlib"}
)
# The stream's frame rate stands unless the shown frames' timestamps disagree with it by more than this share.
FRAME_RATE_TOLERANCE = 0.05


class _Listing:
    """What the decoder showed, frame by frame, while the probe decoded the stream from its start."""

    def __init__(self) -> None:
        self.ticks: list[int | None] = []
        self.keyframes: list[int] = []
        self.digests: list[bytes | None] = []
        self.size_changes: list[tuple[int, int, int]] = []
        self.first: av.VideoFrame | None = None
        self.failed_packets = 0

    def add(self, frame: av.VideoFrame) -> None:
        index = len(self.ticks)
        if self.first is None:
            self.first = frame
        elif (frame.width, frame.height) != self.size(index):
            self.size_changes.append((index, frame.width, frame.height))
        self.ticks.append(frame.pts if frame.pts is not None else frame.dts)
        if frame.key_frame:
            self.keyframes.append(index)
        self.digests.append(frame_digest(frame))

    def size(self, index: int) -> tuple[int, int]:
        """The size of the frames shown last before `index`."""
        if self.size_changes:
            return self.size_changes[-1][1:]
        return self.first.width, self.first.height


def probe_video(path: str, sample_id: str) -> VideoInfo:
    """Every shown frame's time, keyframe flag, size and digest, the rotation, the sample aspect ratio and the
    colour tags. Raises SampleRejected('missing_source' | 'unreadable')."""
    file = Path(path)
    if not file.exists():
        raise SampleRejected("missing_source", sample_id, f"video {path} does not exist; fix the listing")
    if not file.is_file() or file.stat().st_size == 0:
        raise SampleRejected("unreadable", sample_id, f"{path} is empty or not a file; re-export the clip")
    status = file.stat()
    outcome = _probe_once(path, status.st_size, status.st_mtime_ns)
    if isinstance(outcome, SampleRejected):
        raise SampleRejected(outcome.reason, sample_id, outcome.detail)
    return outcome


@functools.lru_cache(maxsize=64)
def _probe_once(path: str, size: int, mtime_ns: int) -> VideoInfo | SampleRejected:
    """The probe of one version of a file (size and mtime name it), or why it is unreadable."""
    try:
        return _probe(path)
    except SampleRejected as rejected:
        return rejected


def _probe(path: str) -> VideoInfo:
    with open_video(path, "") as container:
        notes = []
        tags = replaced_tags(container)
        if tags:
            notes.append(f"metadata tag(s) {', '.join(tags)} are not UTF-8 and were read with U+FFFD in place of the "
                         "bad bytes")
        if not container.streams.video:
            raise SampleRejected("unreadable", "", f"{path} has no video stream")
        stream = container.streams.video[0]
        stream.codec_context.thread_type = "AUTO"  # frame threads too: the probe decodes the whole stream
        listing = _list_shown_frames(container, stream, path)
        if listing.first is None:
            raise SampleRejected("unreadable", "", f"{path}: no frame could be decoded")
        if listing.failed_packets:
            notes.append(f"{listing.failed_packets} packet(s) failed to decode; windows that need them are rejected")
        rotation = _rotation(listing.first, path, notes)
        pts = _presentation_times(listing.ticks, stream.time_base, path)
        ctx = stream.codec_context
        digests = listing.digests
        return VideoInfo(
            width=listing.first.width,
            height=listing.first.height,
            rotation=rotation,
            fps=_frame_rate(stream.average_rate, pts, notes),
            pts=pts,
            codec=ctx.name,
            pix_fmt=ctx.pix_fmt or listing.first.format.name,
            lossless=ctx.name in LOSSLESS_CODECS,
            sample_aspect_ratio=sample_aspect_ratio(stream),
            ticks=struct.pack(f"<{len(listing.ticks)}q", *listing.ticks),
            keyframes=tuple(listing.keyframes),
            digests=b"" if None in digests else b"".join(digests),
            size_changes=tuple(listing.size_changes),
            notes=tuple(notes),
        )


def _list_shown_frames(container, stream, path: str) -> _Listing:
    listing = _Listing()
    try:
        for packet in container.demux(stream):
            if packet.is_corrupt:
                # A short read: the file ends inside this packet, so frames its index lists are gone.
                raise SampleRejected("unreadable", "", f"{path}: the file ends inside a video packet (cut short, "
                                     "e.g. an interrupted download); re-download or re-export it")
            try:
                frames = stream.decode(packet)  # the final empty packet flushes the decoder
            except av.FFmpegError:
                listing.failed_packets += 1
                continue
            for frame in frames:
                listing.add(frame)
    except av.FFmpegError as error:
        raise SampleRejected("unreadable", "", f"{path}: demuxing failed ({error})") from None
    return listing


def _presentation_times(ticks: list[int | None], time_base, path: str) -> tuple[float, ...]:
    """The i-th smallest shown timestamp is frame i's time: the decoder's timestamps follow presentation order in a
    well-formed file, and sorting gives an AVI's decode-order labels back to the frames in the order shown."""
    missing = [i for i, tick in enumerate(ticks) if tick is None]
    if missing:
        raise SampleRejected("unreadable", "", f"{path}: frame {missing[0]} came out of the decoder without a "
                             "timestamp; remux it (e.g. ffmpeg -i IN -c copy OUT.mkv)")
    return tuple(seconds(tick, time_base) for tick in sorted(ticks))


def _frame_rate(average_rate, pts: tuple[float, ...], notes: list[str]) -> float:
    """The stream's average rate, unless the shown frames' timestamps ((N - 1) / span) disagree by more than
    FRAME_RATE_TOLERANCE: then theirs, with a note."""
    span = pts[-1] - pts[0]
    stamped = (len(pts) - 1) / span if span > 0 else None
    if not average_rate:
        return stamped or 0.0
    stated = float(average_rate)
    if stamped is not None and abs(stated - stamped) > FRAME_RATE_TOLERANCE * stamped:
        notes.append(f"the stream states {stated:g} fps but its {len(pts)} shown frames span {span:.6g} s, "
                     f"{stamped:.6g} fps; the timestamps' rate is recorded")
        return stamped
    return stated


def _rotation(first: av.VideoFrame, path: str, notes: list[str]) -> int:
    """The display matrix's rotation, counter-clockwise degrees; a matrix that scales an axis to nothing (all zero,
    say) has none: shown unrotated, with a note."""
    matrix = next((bytes(data) for data in first.side_data if data.type == SideDataType.DISPLAYMATRIX), None)
    if matrix is None:
        return 0
    m = struct.unpack("=9i", matrix[:36])
    if not (m[0] or m[3]) or not (m[1] or m[4]):  # FFmpeg's av_display_rotation_get: no angle, NaN
        notes.append("its display matrix is degenerate (it scales an axis to zero), so no rotation is applied")
        return 0
    rotation = first.rotation % 360
    if rotation % 90:
        raise SampleRejected("unreadable", "", f"{path}: rotation {rotation} is not a multiple of 90")
    return rotation


def sample_aspect_ratio(stream) -> tuple[int, int]:
    """(num, den) of the stream's sample aspect ratio: the container's (e.g. MP4 pasp), else the codec's (e.g.
    H.264 VUI), else square pixels; an unset (0) ratio counts as absent."""
    for ratio in (stream.sample_aspect_ratio, stream.codec_context.sample_aspect_ratio):
        if ratio is not None and ratio > 0:
            return ratio.numerator, ratio.denominator
    return 1, 1
