"""Decode exactly a window's frames, as a decode from the stream's start shows them (docs/frames.md).

Frame i is the i-th picture the decoder shows from the start (stream_probe.py). A window that starts late seeks,
but a seek is proven, not trusted:
1. the decoder is first primed with the stream's first packet, so what only that packet carries (an x264 build
   number in its version SEI, which picks FFmpeg's workarounds for old x264 bugs) is known after the seek;
2. the seek goes to the last keyframe the probe saw at or before the first needed frame, and frames are known by
   the timestamps the probe recorded; pictures shown before the first keyframe after the seek (a landing on a
   P-frame, as MPEG-TS seeks do, or leading pictures of an open GOP) are dropped;
3. from that keyframe on the decoder must show the frames in the probe's order, one after the other, and each
   needed frame must have the digest the probe took of it while decoding from the start (software decoding).
Where any of that fails, the window is decoded from the start instead: the same frames, slower. A verify decodes
from the start always (from_start), so it never shares a defect with the build's path.
"""

from __future__ import annotations

import bisect
from typing import Iterator

import av

from ..errors import SampleRejected
from ..records import VideoInfo
from .container import open_video
from .frame_digest import DIGEST_BYTES, frame_digest


class _Unproven(Exception):
    """A seek that did not deliver what a decode from the start shows."""


def decode_frames(
    path: str, info: VideoInfo, indices: list[int], sample_id: str, hwaccel=None, threads: int = 0,
    from_start: bool = False,
) -> Iterator[tuple[int, av.VideoFrame]]:
    """Yield (index, frame) once per distinct needed index, ascending. A window that starts after the stream's
    first keyframe seeks (proven as above, else decoded from the start); from_start never seeks.
    threads: FFmpeg decoding threads (0: FFmpeg's choice); decoded pixels do not depend on it."""
    needed = sorted(set(indices))
    delivered: set[int] = set()
    anchor = None if from_start or not info.seekable else _last_keyframe(info, needed[0])
    if anchor:  # a keyframe after frame 0: seeking saves decoding the frames before it
        try:
            for index, frame in _after_seek(path, info, anchor, needed, sample_id, hwaccel, threads):
                delivered.add(index)
                yield index, frame
            return
        except _Unproven:
            pass  # the frames delivered so far are proven; the rest come from a decode from the start
    for index, frame in _from_start(path, info, needed, sample_id, hwaccel, threads):
        if index not in delivered:
            yield index, frame


def _last_keyframe(info: VideoInfo, first: int) -> int | None:
    position = bisect.bisect_right(info.keyframes, first)
    return info.keyframes[position - 1] if position else None


def _open(path: str, sample_id: str, hwaccel, threads: int):
    container = open_video(path, sample_id, hwaccel)
    stream = container.streams.video[0]
    if threads:
        stream.codec_context.thread_count = threads
    return container, stream


def _decoded(container, stream) -> Iterator[av.VideoFrame]:
    for packet in container.demux(stream):
        yield from stream.decode(packet)  # the final empty packet flushes the decoder


def _tick(frame: av.VideoFrame) -> int | None:
    return frame.pts if frame.pts is not None else frame.dts


def _check_size(frame: av.VideoFrame, index: int, info: VideoInfo, path: str, sample_id: str) -> None:
    if (frame.width, frame.height) != info.coded_size(index):
        width, height = info.coded_size(index)
        raise SampleRejected("decode_error", sample_id, f"{path}: frame {index} decoded at {frame.width}x"
                             f"{frame.height}, the probe saw it at {width}x{height}; re-encode the source")


def _prime(container, stream) -> None:
    """Decode the stream's first packet, for what the decoder keeps across a seek (an x264 version SEI)."""
    for packet in container.demux(stream):
        if packet.size:
            try:
                stream.decode(packet)
            except av.FFmpegError:
                pass  # a first packet that does not decode alone primes nothing; the proof below still holds
            return


def _after_seek(path: str, info: VideoInfo, anchor: int, needed: list[int], sample_id: str, hwaccel, threads: int
                ) -> Iterator[tuple[int, av.VideoFrame]]:
    """The needed frames from a seek to keyframe `anchor`, each proven; _Unproven where the seek fails."""
    wanted, last = set(needed), needed[-1]
    digests = info.digests if hwaccel is None and len(info.digests) == DIGEST_BYTES * info.num_frames else b""
    ticks = info.frame_ticks
    index_of = {tick: i for i, tick in enumerate(ticks)}
    container, stream = _open(path, sample_id, hwaccel, threads)
    with container:
        try:
            _prime(container, stream)
            container.seek(ticks[anchor], stream=stream, backward=True, any_frame=False)
            position = None  # the frame shown last, once a keyframe started the proven run
            for frame in _decoded(container, stream):
                index = index_of.get(_tick(frame))
                if position is None:
                    if index is None or index > needed[0]:
                        raise _Unproven(f"the seek showed frame {index} before a keyframe at or before {needed[0]}")
                    if not frame.key_frame:
                        continue  # no keyframe yet: a landing past one, or pictures leading it
                elif index != position + 1:
                    raise _Unproven(f"after frame {position} the decoder showed frame {index}")
                position = index
                if position in wanted:
                    _check_size(frame, position, info, path, sample_id)
                    expected = digests[DIGEST_BYTES * position : DIGEST_BYTES * (position + 1)]
                    if expected and frame_digest(frame) != expected:
                        raise _Unproven(f"frame {position} differs from the decode from the start")
                    yield position, frame
                if position >= last:
                    return
        except av.FFmpegError as error:
            raise _Unproven(f"decoding after the seek failed ({error})") from None
    raise _Unproven(f"the stream ended after the seek before frame {last}")


def _from_start(path: str, info: VideoInfo, needed: list[int], sample_id: str, hwaccel, threads: int
                ) -> Iterator[tuple[int, av.VideoFrame]]:
    """The needed frames by their place in the decoder's output from the stream's start, the definition itself."""
    wanted, last = set(needed), needed[-1]
    ticks = info.frame_ticks
    shown = 0
    container, stream = _open(path, sample_id, hwaccel, threads)
    with container:
        try:
            for position, frame in enumerate(_decoded(container, stream)):
                shown = position + 1
                if position < len(ticks) and _tick(frame) != ticks[position]:
                    raise SampleRejected(
                        "decode_error", sample_id,
                        f"{path}: decoding from the start, the decoder showed frame {position} with timestamp "
                        f"{_tick(frame)} where the probe saw {ticks[position]}; the file changed since it was "
                        "probed, or it decodes differently each time: re-encode it")
                if position in wanted:
                    _check_size(frame, position, info, path, sample_id)
                    yield position, frame
                if position >= last:
                    return
        except av.FFmpegError as error:
            raise SampleRejected("decode_error", sample_id, f"{path}: decoding frame {shown} failed ({error}); "
                                 "re-encode the source") from None
    missing = [i for i in needed if i >= shown]
    raise SampleRejected(
        "decode_error", sample_id,
        f"{path}: the decoder showed {shown} frames, the probe counted {info.num_frames}; frame(s) {missing[:5]} "
        f"({len(missing)} of the {len(needed)} the window needs) never came out; the file may be damaged there, "
        "re-encode it")
