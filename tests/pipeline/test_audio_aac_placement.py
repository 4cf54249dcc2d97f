"""Where an AAC track's sound lands in a window (docs/audio.md). An AAC encoder emits priming samples (1024 for
FFmpeg's) before the first input sample; the container says how to drop them (an MP4/MOV edit list, Matroska's
codec delay), and FFmpeg's demuxer and decoder drop them and start the frames' pts at the input's first sample.

A noise burst starts at a known time in .mp4, .mov and .mkv files, with the audio stream starting with the video
and 0.1 s after it. The burst's stored onset, found by cross-correlation with the burst we wrote, must be where
the frames put it, to the sample (AAC is lossy, so the match is by correlation, not equality). The stored PCM must
also equal FFmpeg's own decode (PyAV's frames, each placed at its pts: what `ffmpeg -i x.mp4 out.wav` plays), and
the span it records as covered start at FFmpeg's first frame."""

from __future__ import annotations

from fractions import Fraction

import av
import numpy as np
import pytest

from helpers.audio_media import write_clip_with_audio
from helpers.builds import build_quietly, tiny_config, write_table
from latentforge import LatentCacheDataset

RATE, ONSET, FPS, FRAMES = 16000, 0.2, 24, 17  # windows of 17 / 24 s from the first frame at 0
CLIPS = {f"{suffix}-{start}": (suffix, start) for suffix in ("mp4", "mov", "mkv") for start in (0.0, 0.1)}


def _burst() -> np.ndarray:
    """[1, n] float32: silence, then from ONSET (on the audio stream's own clock) uniform noise of amplitude 0.3."""
    wave = np.zeros(RATE, np.float32)
    first = round(ONSET * RATE)
    wave[first:] = np.random.default_rng(0).uniform(-0.3, 0.3, RATE - first)
    return wave[None]


def _ffmpeg_decode(path, samples: int) -> np.ndarray:
    """The window [0, samples) of FFmpeg's decode: every frame placed at its own pts, silence elsewhere."""
    out = np.zeros(samples, np.float32)
    with av.open(str(path)) as container:
        for frame in container.decode(audio=0):
            at = round(Fraction(frame.pts) * frame.time_base * RATE)
            data = frame.to_ndarray()[0]
            lo, hi = max(at, 0), min(at + data.size, samples)
            if hi > lo:
                out[lo:hi] = data[lo - at:hi - at]
    return out


def _onset_lag(stored: np.ndarray, start: float) -> int:
    """The shift (samples) of the written burst that best matches the stored sound around its expected onset."""
    burst = _burst()[0]
    expected = round((start + ONSET) * RATE)
    around = np.arange(expected - 2400, expected + 2400)

    def match(lag: int) -> float:
        source = around - (round(start * RATE) + lag)  # the burst's sample at each stored sample
        placed = np.where((source >= 0) & (source < burst.size), burst[np.clip(source, 0, burst.size - 1)], 0.0)
        return float(np.dot(stored[around], placed))

    return max(range(-2200, 2201), key=match)  # wide enough to name a priming delay (1024, 2112)


@pytest.fixture(scope="module")
def aac_cache(tmp_path_factory):
    folder = tmp_path_factory.mktemp("aac")
    rows = []
    for name, (suffix, start) in CLIPS.items():
        write_clip_with_audio(folder / f"{name}.{suffix}", audio=_burst(), codec="aac", audio_start=start)
        rows.append({"id": name, "video": f"{name}.{suffix}", "caption": name, "objects": 1})
    with av.open(str(folder / "mp4-0.0.mp4")) as container:  # the priming the files carry
        assert next(p for p in container.demux(audio=0) if p.size).pts == -1024
    table = write_table(rows, folder / "clips.csv")
    root = folder / "cache"
    build_quietly(tiny_config(table, root, modalities=("rgb",), overrides=(
        f"frames.fps={FPS}", f"frames.num_frames={FRAMES}", "audio.enabled=true")))
    return folder, {item["sample_id"]: item for item in LatentCacheDataset(root)}


@pytest.mark.parametrize("name", list(CLIPS))
def test_an_aac_tracks_sound_lands_where_its_frames_put_it(aac_cache, name):
    folder, items = aac_cache
    suffix, start = CLIPS[name]
    stored = np.asarray(items[name]["audio"])[:, 0]
    assert stored.size == round(FRAMES / FPS * RATE)
    assert _onset_lag(stored, start) == 0
    reference = _ffmpeg_decode(folder / f"{name}.{suffix}", stored.size)
    assert np.abs(stored - reference).max() < 1e-6
    with av.open(str(folder / f"{name}.{suffix}")) as container:
        first = next(container.decode(audio=0))
    # the span covered starts at FFmpeg's first frame: for an MP4/MOV stream starting after the video, FFmpeg's
    # muxer leaves the priming unmarked, so it plays (as near-silence) from 1024 samples before the first input one
    assert items[name]["audio_span"][0] == pytest.approx(max(0.0, float(first.pts * first.time_base)), abs=1e-9)
