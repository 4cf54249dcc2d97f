"""A window's sound: the first audio stream decoded over a span of presentation time, resampled, laid on the
window's own sample grid (docs/audio.md).

Output sample i of a window starting at `start` seconds stands for the time start + i / rate. Each run of decoded
audio frames with one sample rate and layout is resampled with FFmpeg's libswresample (the settings in RESAMPLER)
and placed by the presentation time of its first frame, never by packet count, so an audio stream that starts later
than the video, a gap, or a change of the input rate all land where a player plays them. Samples no audio reaches
stay zero (silence); the span that audio does reach is returned with them.
"""

from __future__ import annotations

from dataclasses import dataclass

import av
import numpy as np

from ..errors import SampleRejected
from .container import open_video, seconds

# libswresample's polyphase windowed-sinc resampler, every setting that changes its output pinned (FFmpeg's
# defaults for swr), so another FFmpeg default cannot change a cache.
RESAMPLER = {"resampler": "swr", "filter_size": "32", "phase_shift": "10", "linear_interp": "1",
             "cutoff": "0.97", "filter_type": "kaiser", "kaiser_beta": "9"}
SAMPLE_FORMAT = "fltp"  # float32, one plane per channel
LAYOUTS = {1: "mono", 2: "stereo"}
LEAD_SECONDS = 0.5  # decoded before the window, so the resampler's filter has its history at the window's start
SEEK_FROM_SECONDS = 2.0  # a window starting later than this seeks to LEAD_SECONDS before it


@dataclass(frozen=True)
class AudioWindow:
    """One window's PCM and where audio actually covers it."""

    pcm: np.ndarray  # float32 [samples, channels]; zero where no audio covers the window
    present: bool  # some audio of the source covers part of the window
    has_stream: bool  # the file has an audio stream (covering the window or not)
    covered: tuple[int, int] | None  # [first, last) window samples audio reaches; None: none


def decode_audio(path: str, start: float, samples: int, rate: int, channels: int, sample_id: str,
                 seek: bool = True) -> AudioWindow:
    """The `samples` samples at `rate` from presentation time `start` (seconds, the video's clock) of the first
    audio stream; silence and present=False for a file without one. Audio that cannot be decoded rejects the
    sample (audio_decode_error) naming the time it failed at. seek=False decodes from the stream's start."""
    end = start + samples / rate
    with open_video(path, sample_id) as container:
        if not container.streams.audio:
            return AudioWindow(np.zeros((samples, channels), np.float32), False, False, None)
        stream = container.streams.audio[0]
        if seek and start - LEAD_SECONDS > SEEK_FROM_SECONDS:
            container.seek(int((start - LEAD_SECONDS) / stream.time_base), stream=stream, backward=True)
        grid = _Grid(start, samples, rate, channels)
        _decode_into(container, stream, grid, end, path, sample_id)
    return grid.window()


class _Grid:
    """The window's samples, filled run by run at each run's presentation time."""

    def __init__(self, start: float, samples: int, rate: int, channels: int) -> None:
        self.start, self.rate, self.channels = start, rate, channels
        self.pcm = np.zeros((samples, channels), np.float32)
        self.first: int | None = None  # the first and one past the last window sample audio reached
        self.last: int | None = None

    def place(self, at: float, pcm: np.ndarray) -> None:
        """Lay `pcm` [n, channels] whose first sample plays at `at` seconds onto the window."""
        offset = round((at - self.start) * self.rate)
        lo, hi = max(offset, 0), min(offset + len(pcm), len(self.pcm))
        if lo >= hi:
            return
        self.pcm[lo:hi] = pcm[lo - offset: hi - offset]
        self.first = lo if self.first is None else min(self.first, lo)
        self.last = hi if self.last is None else max(self.last, hi)

    def window(self) -> AudioWindow:
        if self.first is None:
            return AudioWindow(self.pcm, False, True, None)
        return AudioWindow(self.pcm, True, True, (self.first, self.last))


class _Run:
    """Consecutive decoded frames of one rate and layout, resampled as one signal from its first frame's time."""

    def __init__(self, frame: av.AudioFrame, at: float, rate: int, channels: int) -> None:
        self.key = (frame.sample_rate, frame.layout.name, frame.format.name)
        self.at, self.rate, self.channels = at, rate, channels
        self.expected_end = at  # where the next frame of an unbroken run starts
        self.resampler = av.AudioResampler(SAMPLE_FORMAT, LAYOUTS[channels], rate, options=RESAMPLER)
        self.parts: list[np.ndarray] = []

    def continues(self, frame: av.AudioFrame, at: float) -> bool:
        """The frame has this run's format and starts where the run ends (within one input sample)."""
        same = (frame.sample_rate, frame.layout.name, frame.format.name) == self.key
        return same and abs(at - self.expected_end) <= 1.0 / frame.sample_rate

    def push(self, frame: av.AudioFrame | None) -> None:
        if frame is not None:
            self.expected_end += frame.samples / frame.sample_rate
        for out in self.resampler.resample(frame):
            self.parts.append(out.to_ndarray().reshape(self.channels, -1).T)

    def flush_onto(self, grid: _Grid) -> None:
        self.push(None)
        if self.parts:
            grid.place(self.at, np.concatenate(self.parts))


def _decode_into(container, stream, grid: _Grid, end: float, path: str, sample_id: str) -> None:
    run: _Run | None = None
    packet_at = None  # the presentation time of the packet being decoded, for the reject
    try:
        for packet in container.demux(stream):
            if packet.pts is not None:
                packet_at = seconds(packet.pts, packet.time_base)
            for frame in packet.decode():
                at = seconds(frame.pts, frame.time_base) if frame.pts is not None else None
                if at is None:
                    continue  # a frame without a time cannot be placed; its neighbours carry on
                if at + frame.samples / frame.sample_rate < grid.start - LEAD_SECONDS:
                    continue
                if at >= end + LEAD_SECONDS:
                    break
                if run is None or not run.continues(frame, at):
                    if run is not None:
                        run.flush_onto(grid)
                    run = _Run(frame, at, grid.rate, grid.channels)
                run.push(frame)
            else:
                continue
            break
        if run is not None:
            run.flush_onto(grid)
    except (av.FFmpegError, ValueError) as error:
        where = f"at {packet_at:.3f} s" if packet_at is not None else "before its first timestamp"
        raise SampleRejected("audio_decode_error", sample_id,
                             f"{path}: the audio stream cannot be decoded {where} ({error}); re-encode its "
                             "audio (e.g. ffmpeg -i IN -c:v copy -c:a aac OUT) or set audio.enabled=false") from None
