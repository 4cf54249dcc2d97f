"""Non-square pixels: the stream's sample aspect ratio (SAR) shapes the displayed size, the crop and the resize, so
output pixels are square on every resize backend that runs on a CPU.

Clips are written by PyAV/libx264 with a SAR in the stream; what a player shows is worked out here from the SAR
by hand (a circle drawn in display geometry, the crop box of the docs' rule), never by latentforge.
"""

from __future__ import annotations

from fractions import Fraction

import av
import numpy as np
import pytest

from helpers.media import write_video
from latentforge.config import BuildConfig, FramesConfig
from latentforge.decode.resize import nearest_source_indices, plan_resize
from latentforge.pipeline.probe import probe_sample
from latentforge.pipeline.sample import load_sample_pixels
from latentforge.records import Sample, SourceEntry, VideoInfo
from latentforge.tokenizers.base import frames_to_input


def make_config(height: int, width: int, **frames) -> BuildConfig:
    config = BuildConfig()
    config.frames = FramesConfig(**{"num_frames": 5, "height": height, "width": width, "resize": "cover_crop",
                                    **frames})
    return config


def make_sample(path) -> Sample:
    return Sample("clip", 0, SourceEntry(key="clip", video=str(path), video_rel=path.name, caption="a clip"))


def circle_in_display_geometry(stored_w: int, stored_h: int, sar: Fraction, radius: float) -> np.ndarray:
    """uint8 [H, W, 3] stored pixels of a white disc that is round as shown (a stored pixel is `sar` times as wide
    as high), centred in the picture; 4x4 supersampled edges."""
    shown_w = stored_w * float(sar)
    sub = (np.arange(4) + 0.5) / 4
    xs = ((np.arange(stored_w)[:, None] + sub[None]).ravel()) * float(sar) - shown_w / 2
    ys = (np.arange(stored_h)[:, None] + sub[None]).ravel() - stored_h / 2
    inside = (xs[None, :] ** 2 + ys[:, None] ** 2 <= radius**2).astype(np.float32)
    coverage = inside.reshape(stored_h, 4, stored_w, 4).mean(axis=(1, 3))
    return np.repeat((coverage * 255).round().astype(np.uint8)[..., None], 3, axis=-1)


def test_the_pal_widescreen_case_crops_left_and_right():
    """704x576 at 16:11 is shown 1024x576: a 96x64 cover crop keeps 864x576 displayed pixels, about
    [55, 0, 649, 576] in stored pixels (not [0, 51, 704, 518], what square pixels would give)."""
    info = VideoInfo(704, 576, 0, 25.0, (0.0,), "h264", "yuv420p", False, (16, 11))
    assert info.display_size == (1024, 576) and info.upright_size == (704, 576)
    plan = plan_resize(*info.display_size, 96, 64, "cover_crop", stored=info.upright_size)
    assert np.allclose(plan.source_crop, (55, 0, 649, 576), atol=2)
    rows, cols = nearest_source_indices(plan)  # masks sample stored pixels: every index inside the stored frame
    assert 55 <= cols.min() and cols.max() < 649 and 0 <= rows.min() and rows.max() < 576


@pytest.mark.parametrize(("stored", "sar", "frames", "shown", "crop_box"), [
    # 16:11 (a 1/8-size PAL widescreen frame): 128x72 shown, scaled to 114x64, crop x 9..105 of 114 -> stored x
    # 9 * 88 / 114 .. 105 * 88 / 114
    ((88, 72), Fraction(16, 11), (64, 96), (128, 72), (9 * 88 / 114, 0, 105 * 88 / 114, 72)),
    # 4:3 content in a square stored frame: 128x96 shown, scaled to 64x48, crop x 8..56 -> stored x 12..84
    ((96, 96), Fraction(4, 3), (48, 48), (128, 96), (12, 0, 84, 96)),
])
def test_probe_records_the_displayed_size_and_the_crop_in_stored_pixels(tmp_path, stored, sar, frames, shown,
                                                                          crop_box):
    path = write_video(tmp_path / "sar.mp4", np.zeros((5, stored[1], stored[0], 3), np.uint8),
                       sample_aspect_ratio=sar)
    with av.open(str(path)) as container:  # the file really carries the ratio
        assert container.streams.video[0].sample_aspect_ratio == sar
    config = make_config(*frames)
    sample = make_sample(path)
    provenance = load_sample_pixels(sample, probe_sample(sample, config), config).provenance
    assert provenance["source_size"] == list(shown)
    assert provenance["sample_aspect_ratio"] == [sar.numerator, sar.denominator]
    assert provenance["crop_box"] == pytest.approx(crop_box, abs=1e-5)


def test_square_pixels_record_no_ratio(tmp_path):
    path = write_video(tmp_path / "square.mp4", np.zeros((5, 48, 64, 3), np.uint8))
    config = make_config(24, 40)
    sample = make_sample(path)
    assert "sample_aspect_ratio" not in load_sample_pixels(sample, probe_sample(sample, config), config).provenance


@pytest.mark.parametrize("backend", ["swscale", "torch", "device"])
def test_a_circle_drawn_as_shown_stays_a_circle(tmp_path, backend):
    """Stored 88x72 at 16:11 (shown 128x72) holding a disc of radius 28 displayed pixels: cover-cropped to 96x64
    the disc must be as wide as it is high, within a pixel (square pixels would make it 42 wide and 61 high)."""
    disc = circle_in_display_geometry(88, 72, Fraction(16, 11), 28)
    path = write_video(tmp_path / "disc.mp4", np.repeat(disc[None], 5, axis=0), sample_aspect_ratio=Fraction(16, 11))
    config = make_config(64, 96, resize_backend=backend)
    sample = make_sample(path)
    frames = load_sample_pixels(sample, probe_sample(sample, config), config).modalities["rgb"]
    luma = ((frames_to_input([frames], "cpu")[0][0, 0] + 1) * 127.5).numpy()  # red channel, frame 0, [64, 96]
    lit = luma > 127.5
    width, height = int(lit.any(axis=0).sum()), int(lit.any(axis=1).sum())
    assert abs(width - height) <= 1, (width, height)
    assert abs(height - 2 * 28 * 64 / 72) <= 1.5  # the disc's shown diameter at the scale 64 / 72
