"""Frames: window choice, decoding, colour, rotation and resize, checked against PyAV/FFmpeg directly.

Expected frame indices come from PyAV's own decoded timestamps and the rule in docs/frames.md; expected
pixels from PyAV decoding the whole clip and swscale (or torch) resizing it, never from latentforge.
"""

from __future__ import annotations

import hashlib

import av
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from av.video.reformatter import Interpolation

from helpers.media import pattern_frames, write_video
from latentforge.config import BuildConfig, FramesConfig
from latentforge.decode import pyav as pyav_module
from latentforge.errors import SampleRejected
from latentforge.pipeline.probe import probe_sample
from latentforge.pipeline.sample import load_sample_pixels
from latentforge.records import Sample, SourceEntry

# docs/frames.md: swscale runs with the filter plus these flags.
DOC_FLAGS = Interpolation.ACCURATE_RND | Interpolation.FULL_CHR_H_INT | Interpolation.BITEXACT
DOC_FILTERS = {"bicubic": Interpolation.BICUBIC, "bilinear": Interpolation.BILINEAR, "area": Interpolation.AREA}


def make_config(**frames) -> BuildConfig:
    config = BuildConfig()
    config.frames = FramesConfig(**{"num_frames": 5, "height": 24, "width": 40, **frames})
    return config


def make_sample(path, sample_id="clip", start_frame=None, caption="a clip") -> Sample:
    entry = SourceEntry(key=sample_id, video=str(path), video_rel=path.name, caption=caption)
    return Sample(sample_id=sample_id, source_index=0, entry=entry, start_frame=start_frame)


def pyav_frames(path):
    """Every frame as PyAV decodes it from the start, in presentation order."""
    with av.open(str(path)) as container:
        return list(container.decode(video=0))


def expected_indices(times, num_frames, fps, window, sample_id):
    """docs/frames.md, re-derived from the decoded timestamps."""
    if fps is None:
        starts = list(range(len(times) - num_frames + 1))
    else:
        starts = [s for s in range(len(times)) if times[s] + (num_frames - 1) / fps <= times[-1] + 1e-6]
    if window == "start":
        start = starts[0]
    elif window == "center":
        start = starts[(len(starts) - 1) // 2]
    else:
        start = starts[int.from_bytes(hashlib.sha256(sample_id.encode()).digest()[:8], "big") % len(starts)]
    if fps is None:
        return list(range(start, start + num_frames))
    return [max(i for i, t in enumerate(times) if t <= times[start] + k / fps + 1e-6) for k in range(num_frames)]


def scaled_size(src_w, src_h, out_w, out_h, mode):
    if mode == "stretch":
        return out_w, out_h, 0, 0
    scale = max(out_w / src_w, out_h / src_h)
    sw, sh = max(out_w, round(src_w * scale)), max(out_h, round(src_h * scale))
    return sw, sh, (sw - out_w) // 2, (sh - out_h) // 2


def reference_swscale(frame, src_colorspace=None, size=None, filter_name="bicubic"):
    width, height = size if size else (None, None)
    out = frame.reformat(width=width, height=height, format="rgb24", src_colorspace=src_colorspace,
                         interpolation=DOC_FILTERS[filter_name] | DOC_FLAGS)
    return out.to_ndarray()


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return write_video(tmp_path_factory.mktemp("frames") / "clip.mp4", pattern_frames(17, 64, 48), fps=24)


@pytest.mark.parametrize("resize", ["cover_crop", "stretch"])
@pytest.mark.parametrize("fps", ["source", "10"])
@pytest.mark.parametrize("window", ["start", "center", "random"])
def test_window_and_pixels_match_pyav_swscale(clip, window, fps, resize):
    config = make_config(window=window, fps=fps, resize=resize)
    sample = make_sample(clip, sample_id=f"clip-{window}")
    pixels = load_sample_pixels(sample, probe_sample(sample, config), config)

    frames = pyav_frames(clip)
    times = [f.time for f in frames]
    indices = expected_indices(times, 5, None if fps == "source" else 10.0, window, sample.sample_id)
    assert pixels.provenance["frame_indices"] == indices
    assert pixels.provenance["timestamps"] == pytest.approx([times[i] for i in indices], abs=1e-9)
    sw, sh, x0, y0 = scaled_size(64, 48, 40, 24, resize)
    expected = np.stack([reference_swscale(frames[i], size=(sw, sh))[y0 : y0 + 24, x0 : x0 + 40] for i in indices])
    assert pixels.modalities["rgb"].expanded().dtype == np.uint8
    np.testing.assert_array_equal(pixels.modalities["rgb"].expanded(), expected)


@pytest.mark.parametrize(
    ("resize", "filter_name"), [("cover_crop", "bicubic"), ("stretch", "bilinear"), ("cover_crop", "area")]
)
def test_torch_backend_within_one_level_of_torch_on_pyav_rgb(clip, resize, filter_name):
    config = make_config(resize=resize, resize_backend="torch", resize_filter=filter_name, window="center")
    sample = make_sample(clip)
    pixels = load_sample_pixels(sample, probe_sample(sample, config), config)
    frames = pyav_frames(clip)
    sw, sh, x0, y0 = scaled_size(64, 48, 40, 24, resize)
    for out, index in zip(pixels.modalities["rgb"].expanded(), pixels.provenance["frame_indices"]):
        source = torch.from_numpy(reference_swscale(frames[index])).permute(2, 0, 1)[None].float()
        kwargs = {} if filter_name == "area" else {"align_corners": False, "antialias": True}
        ref = F.interpolate(source, size=(sh, sw), mode=filter_name, **kwargs).round().clamp(0, 255)
        ref = ref[0].permute(1, 2, 0).numpy()[y0 : y0 + 24, x0 : x0 + 40]
        assert np.abs(out.astype(int) - ref.astype(int)).max() <= 1


def test_window_decodes_only_its_stretch_of_a_long_clip(tmp_path, monkeypatch):
    path = write_video(tmp_path / "long.mp4", pattern_frames(240, 32, 32), fps=24, gop=12)
    real_open = av.open
    demuxed = []

    class CountingContainer:
        def __init__(self, container):
            self._container = container

        def __getattr__(self, name):
            return getattr(self._container, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return self._container.__exit__(*exc)

        def demux(self, *args, **kwargs):
            for packet in self._container.demux(*args, **kwargs):
                demuxed.append(packet.pts)
                yield packet

    monkeypatch.setattr(pyav_module.av, "open", lambda *a, **k: CountingContainer(real_open(*a, **k)))
    frames = pyav_frames(path)
    for start_frame in (0, 150):
        config = make_config(height=32, width=32, resize="stretch")
        sample = make_sample(path, start_frame=start_frame)
        probe = probe_sample(sample, config)
        demuxed.clear()
        pixels = load_sample_pixels(sample, probe, config)
        assert len(demuxed) < 30, f"window at {start_frame} demuxed {len(demuxed)} of 240 packets"
        expected = np.stack([reference_swscale(frames[i]) for i in range(start_frame, start_frame + 5)])
        np.testing.assert_array_equal(pixels.modalities["rgb"].expanded(), expected)


def test_variable_frame_rate_follows_the_timestamp_rule(tmp_path):
    pts_ms = [0, 30, 70, 100, 133, 170, 200, 240, 300, 310, 333, 370, 400, 430, 470, 500, 540]
    path = write_video(tmp_path / "vfr.mp4", pattern_frames(17, 64, 48), pts_ms=pts_ms)
    config = make_config(fps="12", num_frames=5)
    sample = make_sample(path)
    pixels = load_sample_pixels(sample, probe_sample(sample, config), config)
    frames = pyav_frames(path)
    times = [f.time for f in frames]
    indices = expected_indices(times, 5, 12.0, "start", "clip")
    assert len(set(indices)) == 5 and indices != list(range(5))
    assert pixels.provenance["frame_indices"] == indices
    expected = np.stack([reference_swscale(frames[i], size=(40, 30))[3:27] for i in indices])
    np.testing.assert_array_equal(pixels.modalities["rgb"].expanded(), expected)


def test_rotation_metadata_gives_upright_portrait_frames(tmp_path):
    upright = pattern_frames(9, 48, 64)  # displayed portrait 48 wide, 64 high
    coded = np.ascontiguousarray(np.rot90(upright, k=-1, axes=(1, 2)))  # what a phone stores: 64x48
    path = write_video(tmp_path / "rot.mp4", coded, rotation=90, pix_fmt="yuv444p")
    config = make_config(height=64, width=48, resize="stretch")
    sample = make_sample(path)
    probe = probe_sample(sample, config)
    assert probe.info.display_size == (48, 64)
    rgb = load_sample_pixels(sample, probe, config).modalities["rgb"].values
    assert rgb.shape == (5, 64, 48, 3)
    assert np.abs(rgb.astype(int) - upright[:5].astype(int)).mean() < 4  # wrong orientation gives ~60
    # FFmpeg's own autorotation for a +90 (counter-clockwise) display matrix is transpose=cclock.
    for out, frame in zip(rgb, pyav_frames(path)[:5]):
        graph = av.filter.Graph()
        source = graph.add_buffer(template=pyav_frames(path)[0])
        transpose = graph.add("transpose", "cclock")
        sink = graph.add("buffersink")
        source.link_to(transpose)
        transpose.link_to(sink)
        graph.configure()
        graph.push(frame)
        np.testing.assert_array_equal(out, reference_swscale(graph.pull()))


def test_odd_size_yuv444_and_tagged_bt709_10bit(tmp_path):
    odd = write_video(tmp_path / "odd.mp4", pattern_frames(9, 65, 49), pix_fmt="yuv444p")
    config = make_config(resize="cover_crop")
    sample = make_sample(odd)
    rgb = load_sample_pixels(sample, probe_sample(sample, config), config).modalities["rgb"].values
    sw, sh, x0, y0 = scaled_size(65, 49, 40, 24, "cover_crop")
    expected = np.stack([reference_swscale(f, size=(sw, sh))[y0 : y0 + 24, x0 : x0 + 40] for f in pyav_frames(odd)[:5]])
    np.testing.assert_array_equal(rgb, expected)

    tagged = write_video(tmp_path / "hd.mkv", pattern_frames(9, 64, 48), pix_fmt="yuv420p10le", colorspace="ITU709")
    sample = make_sample(tagged)
    rgb = load_sample_pixels(sample, probe_sample(sample, config), config).modalities["rgb"].values
    frames = pyav_frames(tagged)[:5]
    as_709 = np.stack([reference_swscale(f, "ITU709", (40, 30))[3:27] for f in frames])
    as_601 = np.stack([reference_swscale(f, "ITU601", (40, 30))[3:27] for f in frames])
    np.testing.assert_array_equal(rgb, as_709)
    assert np.abs(rgb.astype(int) - as_601.astype(int)).max() > 3  # the tag really changed the maths


def test_fixed_start_frame_past_the_last_valid_start_is_too_short(clip):
    config = make_config(num_frames=9)
    with pytest.raises(SampleRejected) as rejected:
        probe_sample(make_sample(clip, start_frame=10), config)
    assert rejected.value.reason == "too_short"
    assert "0..8" in rejected.value.detail


def test_ffmpeg_and_swscale_threads_do_not_change_the_pixels(tmp_path):
    """run.decode_threads is execution only: one thread (the build's default) and FFmpeg's own choice decode
    and resize to the same bytes, for the swscale and the torch resize backends."""
    path = write_video(tmp_path / "clip.mp4", pattern_frames(12, 320, 240, seed=3))
    for backend in ("swscale", "torch"):
        config = make_config(num_frames=9, height=144, width=200, resize_backend=backend)
        sample = make_sample(path)
        probe = probe_sample(sample, config)
        by_threads = {}
        for threads in (1, 0, 3):
            config.run.decode_threads = threads
            by_threads[threads] = load_sample_pixels(sample, probe, config).modalities["rgb"].values
        assert np.array_equal(by_threads[1], by_threads[0]) and np.array_equal(by_threads[1], by_threads[3]), backend
