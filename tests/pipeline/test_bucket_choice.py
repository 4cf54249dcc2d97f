"""The bucket rule on the wan2.1-t2v-480p-buckets preset (landscape 480x832, portrait 832x480, square 624x624 at
81 frames): aspect first, then size; sources smaller than every bucket are no_bucket unless frames.bucket_upscale.
Probed sources are described by hand (VideoInfo), so no video is written."""

from __future__ import annotations

import dataclasses

import pytest

from latentforge.config.loading import load_config
from latentforge.errors import SampleRejected
from latentforge.pipeline.bucket_choice import choose_bucket
from latentforge.records import Sample, SourceEntry, VideoInfo

SAMPLE = Sample("s", 0, SourceEntry(key="s", video="s.mp4", video_rel="s.mp4", caption="a clip"))


@pytest.fixture(scope="module")
def frames(tmp_path_factory):
    root = tmp_path_factory.mktemp("preset")
    config = load_config(preset="wan2.1-t2v-480p-buckets", extra={  # validated: each bucket suits the Wan2.1 VAE
        "dataset": {"reader": "table", "path": [str(root / "t.csv")]}, "output": {"root": str(root / "cache")},
        "tokenizer": {"checkpoint": "Wan2.1_VAE.pth"}})
    return config.frames


def _info(width: int, height: int, seconds: float = 6.0, rotation: int = 0, sar: tuple[int, int] = (1, 1)
          ) -> VideoInfo:
    return VideoInfo(width, height, rotation, 30.0, tuple(i / 30 for i in range(round(seconds * 30))), "h264",
                     "yuv420p", False, sar)


@pytest.mark.parametrize("width, height, rotation, expected", [
    (1280, 720, 0, "81x480x832"),
    (720, 1280, 0, "81x832x480"),
    (1280, 720, 90, "81x832x480"),  # coded landscape, shown portrait
    (1080, 1080, 0, "81x624x624"),
    (1440, 1080, 0, "81x480x832"),  # 4:3 keeps 76.9% in landscape, 75% in the square
    (832, 640, 0, "81x624x624"),  # 1.3: the square keeps 76.9%, the larger landscape 75%: aspect first
])
def test_preset_buckets_take_each_aspect(frames, width, height, rotation, expected):
    choice = choose_bucket(_info(width, height, rotation=rotation), frames, SAMPLE)
    assert choice.bucket.name == choice.record["name"] == expected
    assert (choice.frames.num_frames, choice.frames.height, choice.frames.width) == tuple(
        int(v) for v in expected.split("x"))
    assert len(choice.window.indices) == 81 and "without upscaling" in choice.record["reason"]


def test_non_square_pixels_choose_by_the_displayed_aspect(frames):
    """704x576 stored at 16:11 shows 1024x576 (16:9): the landscape bucket keeps 97.5% of it. Taken as square
    pixels (1.22:1) it fills no bucket, and upscaled the square bucket would win (82% against 70%)."""
    assert choose_bucket(_info(704, 576, sar=(16, 11)), frames, SAMPLE).bucket.name == "81x480x832"
    upscale = dataclasses.replace(frames, bucket_upscale=True)
    assert choose_bucket(_info(704, 576), upscale, SAMPLE).bucket.name == "81x624x624"


def test_small_and_short_sources_fit_no_bucket_unless_upscaling(frames):
    with pytest.raises(SampleRejected, match="640x360") as small:
        choose_bucket(_info(640, 360), frames, SAMPLE)
    assert small.value.reason == "no_bucket" and "bucket_upscale" in str(small.value)
    upscaled = choose_bucket(_info(640, 360), dataclasses.replace(frames, bucket_upscale=True), SAMPLE)
    assert upscaled.bucket.name == "81x480x832" and "upscaling allowed" in upscaled.record["reason"]
    with pytest.raises(SampleRejected, match="needs more frames") as short:  # 81 frames at 16 fps span 5 s
        choose_bucket(_info(1280, 720, seconds=4.0), dataclasses.replace(frames, bucket_upscale=True), SAMPLE)
    assert short.value.reason == "no_bucket"
