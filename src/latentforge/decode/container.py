"""Opening a video with PyAV, one way for the probe and every decode: tags that are not UTF-8 are read with U+FFFD in
place of the bad bytes (PyAV's default raises UnicodeDecodeError, which no per-file handling expects), and a file
FFmpeg cannot open is rejected, naming the file."""

from __future__ import annotations

import av

from ..errors import SampleRejected

REPLACEMENT = "\ufffd"


def open_video(path: str, sample_id: str, hwaccel=None):
    """The input container of `path`; SampleRejected('unreadable') when FFmpeg cannot open it."""
    options = {"metadata_errors": "replace"}
    if hwaccel is not None:
        options["hwaccel"] = hwaccel
    try:
        return av.open(path, **options)
    except av.FFmpegError as error:
        raise SampleRejected("unreadable", sample_id, f"{path}: FFmpeg cannot open it ({error})") from None


def replaced_tags(container) -> list[str]:
    """The metadata tags of the file and its streams that were not valid UTF-8 (read with U+FFFD)."""
    tags = [key for key, value in container.metadata.items() if REPLACEMENT in value]
    for stream in container.streams:
        tags += [f"stream {stream.index} {key}" for key, value in stream.metadata.items() if REPLACEMENT in value]
    return tags


def seconds(ticks: int, time_base) -> float:
    """A timestamp in seconds; one conversion for the probe and the decode, so their times are equal floats."""
    return float(ticks * time_base)
