"""Awkward containers decode to exactly what a decode from the stream's start shows, or are rejected with the true
cause: seeks that land between keyframes or lose the first packet's SEI, decode-order timestamps, hidden frames,
a mid-stream size change, a false frame rate, a tag that is not UTF-8, an all-zero display matrix.

The reference is PyAV decoding each file from its start (frame i = the i-th picture out of the decoder) and
swscale converting it, never latentforge; the files come from tests/helpers/container_media.py.
"""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest
from av.video.reformatter import Interpolation

from helpers import container_media
from latentforge.config import BuildConfig, FramesConfig
from latentforge.decode import frame_reader
from latentforge.errors import SampleRejected
from latentforge.pipeline.probe import probe_sample
from latentforge.pipeline.sample import load_sample_pixels
from latentforge.records import Sample, SourceEntry

FIXTURES = Path(__file__).parent / "fixtures"

# docs/frames.md: swscale's rgb24 conversion with these flags (no resize: the output is the source size).
FLAGS = Interpolation.BICUBIC | Interpolation.ACCURATE_RND | Interpolation.FULL_CHR_H_INT | Interpolation.BITEXACT


def reference(path, keep=None) -> tuple[list[np.ndarray | None], list[int], list[tuple[int, int]]]:
    """Every picture PyAV's decoder shows from the start, as RGB, with its timestamp and size, in output order
    (with `keep`, only the pictures at those indices are converted, the others are None, and decoding stops at the
    last one kept)."""
    rgb, ticks, sizes = [], [], []
    with av.open(str(path), metadata_errors="replace") as container:
        for i, f in enumerate(container.decode(video=0)):
            keep_it = keep is None or i in keep
            rgb.append(f.reformat(format="rgb24", interpolation=FLAGS).to_ndarray() if keep_it else None)
            ticks.append(f.pts)
            sizes.append((f.width, f.height))
            if keep is not None and i >= max(keep):
                break
    return rgb, ticks, sizes


def window(path, start: int, num_frames: int = 5, width: int = 64, height: int = 48):
    """(provenance, uint8 [T, H, W, 3]) of the window at `start`, stretched to the source size (no resize)."""
    config = BuildConfig()
    config.frames = FramesConfig(num_frames=num_frames, height=height, width=width, resize="stretch")
    sample = Sample("clip", 0, SourceEntry(key="clip", video=str(path), video_rel=path.name, caption="c"), start)
    pixels = load_sample_pixels(sample, probe_sample(sample, config), config)
    return pixels.provenance, pixels.modalities["rgb"].expanded()


def assert_windows_equal_the_decode_from_the_start(path, step: int = 4, num_frames: int = 5, starts=None) -> None:
    """Every window (or those at `starts`, read at the source size) equals the decode from the stream's start."""
    keep = None if starts is None else {i for s in starts for i in range(s, s + num_frames)}
    rgb, _, sizes = reference(path, keep)
    size = {} if starts is None else dict(zip(("width", "height"), sizes[0]))
    wrong = []
    for start in range(0, len(rgb) - num_frames + 1, step) if starts is None else starts:
        provenance, frames = window(path, start, num_frames, **size)
        assert provenance["frame_indices"] == list(range(start, start + num_frames))
        expected = np.stack(rgb[start : start + num_frames])
        if not np.array_equal(frames, expected):
            wrong.append((start, float(np.abs(frames.astype(int) - expected).mean())))
    assert wrong == [], f"windows (start, mean abs level) that differ from the decode from the start: {wrong}"


def test_mpeg4_in_mpeg_ts_seeks_never_hand_out_unreferenced_frames(tmp_path):
    """MPEG-TS has no index: a seek lands on a P-frame between keyframes, whose pictures reference nothing."""
    assert_windows_equal_the_decode_from_the_start(container_media.mpeg4_ts_long_gop(tmp_path / "long.ts"))


def test_old_x264_444_keeps_its_first_packets_workaround_after_a_seek(tmp_path):
    path = container_media.old_x264_lossless_444(tmp_path / "old.mp4")
    rgb, _, _ = reference(path)
    with av.open(str(path)) as container:  # a bare seek to the second keyframe decodes it otherwise: the hazard
        stream = container.streams.video[0]
        container.seek(12 * 512, stream=stream, backward=True)
        bare = next(iter(container.decode(stream))).reformat(format="rgb24", interpolation=FLAGS).to_ndarray()
    assert np.abs(bare.astype(int) - rgb[12]).mean() > 1  # the file exercises the workaround
    assert_windows_equal_the_decode_from_the_start(path)


def test_a_real_old_x264_444_file_keeps_its_first_packets_workaround_after_a_seek():
    """Not emulated: imageio's cockatoo.mp4 (tests/decode/fixtures/README.md), High 4:4:4 Predictive from x264
    core 142, 280 frames at 1280x720 with IDRs at frames 0, 76 and 145. Its version SEI sits in the first packet
    only; a bare seek to the third IDR decodes it otherwise (FFmpeg applies the workaround for x264 builds before
    151 only after seeing that SEI), and with the decoder told the build it decodes it exactly, so this file
    exercises that hazard. Windows past each later IDR must equal the decode from the start."""
    path = FIXTURES / "cockatoo_x264_core142_444.mp4"
    assert b"x264 - core 142" in path.read_bytes()
    rgb, ticks, _ = reference(path, keep={145})

    def bare_seek(options=None):
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            assert stream.codec_context.profile == "High 4:4:4 Predictive"
            if options:
                stream.codec_context.options = options
            container.seek(ticks[145], stream=stream, backward=True)
            frame = next(iter(container.decode(stream)))
        assert frame.pts == ticks[145]
        return np.abs(frame.reformat(format="rgb24", interpolation=FLAGS).to_ndarray().astype(int) - rgb[145]).mean()

    assert bare_seek() > 1  # the file exercises the hazard
    assert bare_seek({"x264_build": "142"}) == 0  # and it is that workaround, nothing else
    assert_windows_equal_the_decode_from_the_start(path, num_frames=3, starts=[145])


def test_without_priming_the_digests_catch_the_bad_seek_and_the_start_decode_takes_over(tmp_path, monkeypatch):
    """The proof does not rest on priming: with it switched off, the frames a seek decodes differ from the
    probe's digests and the window is decoded from the start instead."""
    path = container_media.old_x264_lossless_444(tmp_path / "old.mp4")
    monkeypatch.setattr(frame_reader, "_prime", lambda container, stream: None)
    fell_back = []
    real = frame_reader._from_start
    monkeypatch.setattr(frame_reader, "_from_start", lambda *args: fell_back.append(args[2]) or real(*args))
    assert_windows_equal_the_decode_from_the_start(path)
    assert [12, 13, 14, 15, 16] in fell_back


def test_avi_b_frames_are_numbered_and_timed_as_shown(tmp_path):
    """AVI labels packets in decode order: the decoder shows timestamps 1, 4, 3, 5, 2, ... Frame i is the i-th
    picture shown, and its time the i-th smallest timestamp."""
    path = container_media.x264_avi_bframes(tmp_path / "b.avi")
    rgb, ticks, _ = reference(path)
    assert ticks != sorted(ticks)  # the hazard is there
    provenance, _ = window(path, 4)
    assert provenance["timestamps"] == pytest.approx([t / 24 for t in sorted(ticks)[4:9]], abs=1e-9)
    assert provenance["source_fps"] == 24.0
    assert_windows_equal_the_decode_from_the_start(path, step=3)


def test_hidden_frames_are_not_frames(tmp_path):
    path = container_media.vp9_hidden_frames(tmp_path / "hidden.webm")
    rgb, ticks, _ = reference(path)
    with av.open(str(path)) as container:
        packets = sum(1 for p in container.demux(video=0) if p.size)
    assert (packets, len(rgb)) == (32, 30)
    provenance, _ = window(path, 25)
    assert provenance["frame_indices"] == [25, 26, 27, 28, 29]  # the last window there is: 30 frames, not 32
    assert provenance["timestamps"] == pytest.approx([ticks[i] / 1000 for i in range(25, 30)], abs=1e-9)
    assert_windows_equal_the_decode_from_the_start(path, step=3)


def test_a_mid_stream_size_change_is_planned_per_window_or_rejected(tmp_path):
    path = container_media.vp9_resolution_change(tmp_path / "sizes.webm")
    rgb, _, sizes = reference(path)
    assert sizes[15] == (64, 48) and sizes[16] == (64, 40)
    before, frames = window(path, 8, height=48)
    assert before["source_size"] == [64, 48] and np.array_equal(frames, np.stack(rgb[8:13]))
    after, frames = window(path, 20, height=40)
    assert after["source_size"] == [64, 40] and after["crop_box"] == [0, 0, 64, 40]
    assert np.array_equal(frames, np.stack(rgb[20:25]))
    with pytest.raises(SampleRejected) as across:
        window(path, 13)
    assert across.value.reason == "resolution_change"
    assert all(text in across.value.detail for text in ("64x48", "64x40", "frame 16"))


@pytest.mark.parametrize("suffix", ["flv", "mkv"])
def test_a_false_stated_frame_rate_loses_to_the_timestamps(tmp_path, suffix):
    path = container_media.false_frame_rate(tmp_path / f"rate.{suffix}")
    with av.open(str(path)) as container:
        assert container.streams.video[0].average_rate == 1000  # what the container states
    provenance, _ = window(path, 0)
    assert provenance["source_fps"] == pytest.approx(30.0, rel=0.01)
    assert any("1000 fps" in note for note in provenance["source_notes"])


def test_a_tag_that_is_not_utf8_is_replaced_and_noted(tmp_path):
    path = container_media.non_utf8_tag(tmp_path / "tag.mp4")
    with pytest.raises(UnicodeDecodeError):  # PyAV's default: what ended whole builds
        av.open(str(path)).close()
    provenance, frames = window(path, 0)
    assert any("title" in note and "UTF-8" in note for note in provenance["source_notes"])
    assert np.array_equal(frames, np.stack(reference(path)[0][:5]))


def test_an_all_zero_display_matrix_means_no_rotation(tmp_path):
    path = container_media.zero_display_matrix(tmp_path / "zero.mp4")
    with av.open(str(path)) as container:
        assert next(iter(container.decode(video=0))).rotation == -2147483648  # what PyAV reads from it
    provenance, frames = window(path, 0)
    assert provenance["rotation"] == 0 and any("display matrix" in n for n in provenance["source_notes"])
    assert np.array_equal(frames, np.stack(reference(path)[0][:5]))


def test_ordinary_clips_record_no_notes(tmp_path):
    path = container_media.mpeg4_ts_long_gop(tmp_path / "plain.ts", count=12, gop=12)
    assert "source_notes" not in window(path, 0)[0]
