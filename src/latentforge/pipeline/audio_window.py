"""Each window's sound (audio.enabled, docs/audio.md): its span of presentation time, the checks at probe time, the
decode through decode/audio.py and the arrays stored beside the latent.

A window's sound runs from its first frame's presentation time to the end of its last frame: at a target fps that
is num_frames / fps seconds, at the source rate the last frame's time plus the gap to the next frame (the stream's
rate for the video's last frame). It holds round(duration * sample_rate) samples.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..cache.audio_section import AUDIO, AUDIO_LENGTH, AUDIO_SPAN, AudioSection
from ..cache.conditioning_streams import ConditioningStream
from ..config import BuildConfig, target_fps
from ..decode.audio import RESAMPLER, decode_audio
from ..errors import SampleRejected
from ..records import Sample, VideoInfo
from ..transforms.window import FrameWindow
from .audio_latent import audio_latent_stream

RULE = ("from the first frame's presentation time to the last frame's end (at a target fps num_frames / fps "
        "seconds, at the source rate the gap to the next frame); output sample i plays at start + i / sample_rate; "
        "decoded audio placed by its presentation time")


def window_samples(config: BuildConfig) -> int:
    """The stored length of every row's PCM: num_frames / fps at a target fps, else audio.max_seconds."""
    fps, audio = target_fps(config.frames), config.audio
    seconds = config.frames.num_frames / fps if fps is not None else float(audio.max_seconds or 0)
    return round(seconds * audio.sample_rate)


def audio_section(config: BuildConfig) -> AudioSection | None:
    """What cache_config.json records of the sound (the audio latent's stream too); None without audio.enabled."""
    audio = config.audio
    if not audio.enabled:
        return None
    latent = audio_latent_stream(config, window_samples(config))
    streams = audio_streams(config) + (() if latent is None else (latent,))
    return AudioSection(audio.sample_rate, audio.channels, window_samples(config), audio.partial, dict(RESAMPLER),
                        RULE, streams)


def audio_streams(config: BuildConfig) -> tuple[ConditioningStream, ...]:
    """The streams decode makes (PCM, span, length), stored as decoded; () without audio.enabled."""
    audio = config.audio
    if not audio.enabled:
        return ()
    return (ConditioningStream(AUDIO, (window_samples(config), audio.channels), "float32", {"rule": RULE}),
            ConditioningStream(AUDIO_SPAN, (2,), "float64", {"unit": "seconds from the window's first frame"}),
            ConditioningStream(AUDIO_LENGTH, (1,), "int64", {"unit": "samples"}))


def window_sound_span(info: VideoInfo, window: FrameWindow, config: BuildConfig) -> tuple[float, int]:
    """(start seconds on the video's clock, samples) of the window's sound."""
    fps, rate = target_fps(config.frames), config.audio.sample_rate
    start = window.timestamps[0]
    if fps is not None:
        return start, round(config.frames.num_frames / fps * rate)
    last = window.indices[-1]
    end = info.pts[last + 1] if last + 1 < len(info.pts) else info.pts[last] + 1.0 / info.fps
    return start, round((end - start) * rate)


def check_sound_fits(sample: Sample, info: VideoInfo, window: FrameWindow, config: BuildConfig) -> None:
    """At the probe: a window longer than the stored length is rejected (audio_too_long) before any decode."""
    if not config.audio.enabled:
        return
    _, samples = window_sound_span(info, window, config)
    if samples > window_samples(config):
        rate = config.audio.sample_rate
        raise SampleRejected("audio_too_long", sample.sample_id,
                             f"{sample.entry.video_rel}: the window lasts {samples / rate:.3f} s at {info.fps:g} fps, "
                             f"longer than audio.max_seconds={config.audio.max_seconds}; raise it or set a target "
                             "frames.fps")


def load_sound(sample: Sample, info: VideoInfo, window: FrameWindow, config: BuildConfig, from_start: bool = False
               ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The window's stored arrays and its manifest record {present, start_s, end_s, samples}; audio covering only
    part of the window is rejected (audio_partial) under audio.partial=reject. from_start: decode from the stream's
    start, never seeking (what a deep verify does)."""
    audio = config.audio
    start, samples = window_sound_span(info, window, config)
    decoded = decode_audio(sample.entry.video, start, samples, audio.sample_rate, audio.channels, sample.sample_id,
                           seek=not from_start)
    first, last = decoded.covered or (0, 0)
    rate = audio.sample_rate
    if audio.partial == "reject" and decoded.has_stream and (first, last) != (0, samples):
        covers = f"{start + first / rate:.3f}..{start + last / rate:.3f} s" if decoded.present else "none"
        raise SampleRejected("audio_partial", sample.sample_id,
                             f"{sample.entry.video_rel}: audio covers {covers} of the window {start:.3f}.."
                             f"{start + samples / rate:.3f} s; choose windows the audio covers, or keep them padded "
                             "with silence with audio.partial=pad")
    pcm = np.zeros((window_samples(config), audio.channels), np.float32)
    pcm[:samples] = decoded.pcm
    arrays = {AUDIO: pcm, AUDIO_SPAN: np.array([first / rate, last / rate], np.float64),
              AUDIO_LENGTH: np.array([samples], np.int64)}
    record = {"present": decoded.present, "start_s": start + first / rate if decoded.present else None,
              "end_s": start + last / rate if decoded.present else None, "samples": samples}
    return arrays, record
