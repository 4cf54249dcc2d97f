"""The sound of preview.mp4 (docs/stats.md): each previewed window's stored PCM, its own `audio_length` samples, as
an audio track of its own beside the video, at the cache's sample rate and channel count, starting with the first
frame. Tracks follow the samples' order top to bottom; a player plays the first and can switch to the others.

AAC (FFmpeg's own encoder) plays in every player and browser; at a rate AAC does not take (it takes 7350..96000 Hz
in 13 steps) the track is 16-bit PCM, which FFmpeg's mp4 muxer stores as ISO/IEC 23003-5 `ipcm`.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from ..cache.audio_section import AUDIO, AUDIO_LENGTH
from ..cache.rows import ManifestRow
from ..verification.deep_checks import stored_row

AAC = "aac"
PCM = "pcm_s16le"
LAYOUTS = {1: "mono", 2: "stereo"}


@dataclass(frozen=True)
class Sound:
    """One window's sound as the preview plays it."""

    pcm: np.ndarray  # float32 [samples, channels] in [-1, 1]: the window's own length, no padding
    rate: int  # Hz
    title: str  # the track's name, naming the sample


def stored_sound(root: Path, row: ManifestRow, rate: int) -> Sound:
    """The row's stored PCM cut to its own audio_length (the padding past it is not the window's sound)."""
    length = int(stored_row(root, row, AUDIO_LENGTH)[0])
    return Sound(stored_row(root, row, AUDIO)[:length], rate, f"dataset_index {row.dataset_index}")


def sound_codec(rate: int) -> str:
    """AAC where its encoder takes the rate, else 16-bit PCM."""
    return AAC if rate in av.codec.Codec(AAC, "w").audio_rates else PCM


def add_sound_track(container: av.container.OutputContainer, sound: Sound) -> av.audio.stream.AudioStream:
    """A track for `sound`; every track must be added before the first packet is muxed."""
    stream = container.add_stream(sound_codec(sound.rate), rate=sound.rate)
    stream.layout = LAYOUTS[sound.pcm.shape[1]]
    stream.metadata["title"] = sound.title
    return stream


def mux_sound(container: av.container.OutputContainer, stream: av.audio.stream.AudioStream, sound: Sound) -> None:
    """The whole window as one frame whose first sample plays at 0, the first video frame's time; the encoder
    converts it to its own sample format (float to AAC's planar float, or to int16 rounded and clipped)."""
    interleaved = np.ascontiguousarray(sound.pcm, dtype=np.float32).reshape(1, -1)
    frame = av.AudioFrame.from_ndarray(interleaved, format="flt", layout=stream.layout.name)
    frame.sample_rate, frame.pts, frame.time_base = sound.rate, 0, Fraction(1, sound.rate)
    container.mux(stream.encode(frame))
    container.mux(stream.encode())
