"""Mask and depth sources at another frame rate than the RGB video are matched to the window by presentation time
(docs/modalities.md); sources at the same rate keep the frame-index rule. Real media written by PyAV; the expected
frames are decoded independently with PyAV and picked by index arithmetic."""

from __future__ import annotations

import av
import numpy as np
import pytest

from helpers.media import pattern_frames, write_png_folder, write_video
from latentforge.config import BuildConfig, FramesConfig
from latentforge.errors import SampleRejected
from latentforge.pipeline.probe import probe_sample
from latentforge.pipeline.sample import load_sample_pixels
from latentforge.records import Sample, SourceEntry

W, H = 64, 48


def mask_ids(count: int) -> np.ndarray:
    """uint8 [T, H, W] ids, every frame different."""
    y, x = np.mgrid[0:H, 0:W]
    return np.stack([((x // 8 + y // 8 + 3 * j) % 11).astype(np.uint8) for j in range(count)])


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    folder = tmp_path_factory.mktemp("times")
    rgb = write_video(folder / "rgb.mp4", pattern_frames(24, W, H), fps=30)
    mask15 = write_video(folder / "mask15.mkv", mask_ids(12), fps=15, codec="ffv1", pix_fmt="gray")
    short = write_video(folder / "short.mkv", mask_ids(9), fps=15, codec="ffv1", pix_fmt="gray")
    same = write_video(folder / "same.mkv", mask_ids(24), fps=30, codec="ffv1", pix_fmt="gray")
    pngs = write_png_folder(folder / "pngs", mask_ids(12))
    return {"rgb": rgb, "mask15": mask15, "short": short, "same": same, "pngs": pngs}


def config(mask_fps="source") -> BuildConfig:
    built = BuildConfig()
    built.frames = FramesConfig(num_frames=9, height=H, width=W, resize="stretch")
    built.modalities.names = ["rgb", "mask"]
    built.modalities.mask.fps = mask_fps
    return built


def sample(media, mask, start=None) -> Sample:
    entry = SourceEntry(key="s", video=str(media["rgb"]), video_rel="rgb.mp4", caption="c", mask=str(mask))
    return Sample(sample_id="s", source_index=0, entry=entry, start_frame=start)


def decoded_ids(path) -> list[np.ndarray]:
    with av.open(str(path)) as container:
        return [frame.to_ndarray() for frame in container.decode(video=0)]


def stored_ids(pixels) -> np.ndarray:
    return pixels.modalities["mask"].values


@pytest.mark.parametrize("start", [0, 7])
def test_15_fps_mask_video_takes_the_frame_shown_at_each_rgb_time(media, start):
    cfg = config()
    probe = probe_sample(sample(media, media["mask15"], start), cfg)
    pixels = load_sample_pixels(sample(media, media["mask15"], start), probe, cfg)
    # RGB frame i shows at i/30 s, mask frame j at j/15 s: the mask frame shown at i/30 is floor(i / 2)
    expected = [(start + k) // 2 for k in range(9)]
    assert pixels.provenance["mask"]["frame_indices"] == expected
    assert pixels.provenance["mask"]["fps"] == 15
    assert pixels.provenance["frame_indices"] == list(range(start, start + 9))
    reference = decoded_ids(media["mask15"])
    assert np.array_equal(stored_ids(pixels), np.stack([reference[j] for j in expected]))


def test_same_rate_mask_keeps_the_index_rule_and_its_row(media):
    cfg = config()
    probe = probe_sample(sample(media, media["same"], 3), cfg)
    assert probe.timed == {}
    pixels = load_sample_pixels(sample(media, media["same"], 3), probe, cfg)
    assert "frame_indices" not in pixels.provenance["mask"] and "fps" not in pixels.provenance["mask"]
    reference = decoded_ids(media["same"])
    assert np.array_equal(stored_ids(pixels), np.stack(reference[3:12]))


def test_png_folder_with_a_configured_rate(media):
    with pytest.raises(SampleRejected) as mismatch:  # 12 frames beside 24: the index rule refuses it
        probe_sample(sample(media, media["pngs"], 0), config())
    assert mismatch.value.reason == "modality_mismatch"
    cfg = config(mask_fps="15")
    pixels = load_sample_pixels(sample(media, media["pngs"], 5), probe_sample(sample(media, media["pngs"], 5), cfg),
                                cfg)
    expected = [(5 + k) // 2 for k in range(9)]
    assert pixels.provenance["mask"]["frame_indices"] == expected
    assert np.array_equal(stored_ids(pixels), mask_ids(12)[expected])


def test_a_mask_that_ends_inside_the_window_rejects_it(media):
    # 9 frames at 15 fps cover 0 .. 8/15 + 1/30 s = 0.567 s; a window from frame 8 needs 0.267 .. 0.533 s
    assert probe_sample(sample(media, media["short"], 8), config()).timed["mask"].indices[-1] == 8
    with pytest.raises(SampleRejected) as short:  # from frame 10: 0.333 .. 0.600 s
        probe_sample(sample(media, media["short"], 10), config())
    assert short.value.reason == "side_stream_short"
    assert "covers 0.000..0.56" in short.value.detail
    assert "mask source" in short.value.detail
