"""Clips with sound for the audio tests: PyAV writes a video stream and an audio stream whose first sample plays at
a chosen time, so where a tone begins is known exactly."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from helpers.media import pattern_frames


def tone_after(onset: float, rate: int, seconds: float, channels: int = 1, start: float = 0.0) -> np.ndarray:
    """float32 [channels, n] of `seconds` from `start`: silence, then from `onset` a 440 Hz sine of amplitude 0.5."""
    times = start + np.arange(round(seconds * rate)) / rate
    wave = np.where(times >= onset - 0.5 / rate, 0.5 * np.sin(2 * np.pi * 440 * (times - onset)), 0.0)
    return np.repeat(wave[None].astype(np.float32), channels, axis=0)


def write_clip_with_audio(path: Path, frames: int = 24, fps: int = 24, audio: np.ndarray | None = None,
                          rate: int = 16000, audio_start: float = 0.0, codec: str = "pcm_s16le",
                          size: tuple[int, int] = (64, 48)) -> Path:
    """An mp4 (or .mov/.mkv by suffix) of `frames` pattern frames at `fps` and, given `audio` [channels, n] float32,
    an audio stream whose first sample plays at `audio_start` seconds (the video's first frame at 0)."""
    video = pattern_frames(frames, *size)
    with av.open(str(path), "w") as container:
        vstream = container.add_stream("libx264", rate=fps)
        vstream.width, vstream.height, vstream.pix_fmt = size[0], size[1], "yuv420p"
        vstream.options = {"crf": "18", "g": "12"}
        astream = None
        if audio is not None:
            astream = container.add_stream(codec, rate=rate)
            astream.layout = "mono" if audio.shape[0] == 1 else "stereo"
            astream.time_base = Fraction(1, rate)
        for index, rgb in enumerate(video):
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
            frame.pts = index
            container.mux(vstream.encode(frame))
        container.mux(vstream.encode())
        if astream is not None:
            fmt = astream.codec_context.format.name
            block = astream.codec_context.frame_size or 1024
            first = round(audio_start * rate)
            for at in range(0, audio.shape[1], block):
                chunk = np.ascontiguousarray(audio[:, at:at + block])
                if fmt.startswith("s16"):
                    chunk = (np.clip(chunk, -1, 1) * 32767).round().astype(np.int16)
                if not fmt.endswith("p"):
                    chunk = chunk.T.reshape(1, -1)
                frame = av.AudioFrame.from_ndarray(chunk, format=fmt, layout=astream.layout.name)
                frame.sample_rate, frame.pts, frame.time_base = rate, first + at, Fraction(1, rate)
                container.mux(astream.encode(frame))
            container.mux(astream.encode())
    return path


def write_clip_with_broken_audio(path: Path, frames: int = 24, fps: int = 24, rate: int = 16000) -> Path:
    """An mp4 whose AAC audio packets hold bytes no AAC decoder accepts (the container and video are sound)."""
    video = pattern_frames(frames, 64, 48)
    rng = np.random.default_rng(7)
    with av.open(str(path), "w") as container:
        vstream = container.add_stream("libx264", rate=fps)
        vstream.width, vstream.height, vstream.pix_fmt = 64, 48, "yuv420p"
        astream = container.add_stream("aac", rate=rate)
        astream.layout = "mono"
        for index, rgb in enumerate(video):
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
            frame.pts = index
            container.mux(vstream.encode(frame))
        container.mux(vstream.encode())
        silence = av.AudioFrame.from_ndarray(np.zeros((1, 1024), np.float32), format="fltp", layout="mono")
        silence.sample_rate, silence.pts = rate, 0
        real = [packet for packet in astream.encode(silence) + astream.encode() if packet.size]
        for number in range(round(frames / fps * rate / 1024) + 1):
            packet = av.Packet(rng.integers(0, 256, real[0].size, dtype=np.uint8).tobytes())
            packet.stream, packet.pts, packet.dts = astream, number * 1024, number * 1024
            packet.time_base = real[0].time_base
            container.mux(packet)
    return path
