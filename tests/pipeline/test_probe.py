"""Probe: every reject reason it owns, on real files written by PyAV, Pillow and numpy."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.media import pattern_frames, write_png_folder, write_text_file, write_video
from latentforge.config import BuildConfig, FramesConfig
from latentforge.errors import SampleRejected
from latentforge.pipeline.probe import probe_sample
from latentforge.records import Sample, SourceEntry


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    return write_video(tmp_path_factory.mktemp("probe") / "v.mp4", pattern_frames(9, 64, 48))


def make_config(num_frames=5, modalities=("rgb",), on_missing_caption="reject") -> BuildConfig:
    config = BuildConfig()
    config.frames = FramesConfig(num_frames=num_frames, height=24, width=40)
    config.modalities.names = list(modalities)
    config.dataset.on_missing_caption = on_missing_caption
    return config


def make_sample(video, caption="a clip", mask=None) -> Sample:
    entry = SourceEntry(key="s", video=str(video), video_rel="v.mp4", caption=caption, mask=mask)
    return Sample(sample_id="s", source_index=0, entry=entry)


def reason(sample, config) -> str:
    with pytest.raises(SampleRejected) as rejected:
        probe_sample(sample, config)
    assert rejected.value.sample_id == "s"
    return rejected.value.reason


def test_accepted_sample(video):
    result = probe_sample(make_sample(video), make_config())
    assert result.info.num_frames == 9 and result.info.display_size == (64, 48)
    assert result.window.indices == (0, 1, 2, 3, 4)
    assert result.caption == "a clip"


def test_unreadable_and_missing_videos(tmp_path):
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    assert reason(make_sample(empty), make_config()) == "unreadable"
    assert reason(make_sample(write_text_file(tmp_path / "text.mp4")), make_config()) == "unreadable"
    assert reason(make_sample(tmp_path / "absent.mp4"), make_config()) == "missing_source"


def test_too_short(video):
    assert reason(make_sample(video), make_config(num_frames=13)) == "too_short"
    at_4fps = make_config(num_frames=5)
    at_4fps.frames.fps = "4"  # needs a 1 s span, the clip spans 8/24 s
    assert reason(make_sample(video), at_4fps) == "too_short"


def test_captions(video):
    assert reason(make_sample(video, caption=None), make_config()) == "missing_caption"
    assert reason(make_sample(video, caption="  \n"), make_config()) == "empty_caption"
    assert probe_sample(make_sample(video, caption=None), make_config(on_missing_caption="empty")).caption == ""


def test_mask_mismatches(tmp_path, video):
    config = make_config(modalities=("rgb", "mask"))
    short = write_png_folder(tmp_path / "short", np.zeros((8, 48, 64), np.uint8))
    assert reason(make_sample(video, mask=str(short)), config) == "modality_mismatch"
    small = write_png_folder(tmp_path / "small", np.zeros((9, 48, 62), np.uint8))
    assert reason(make_sample(video, mask=str(small)), config) == "modality_mismatch"
    assert reason(make_sample(video, mask=str(tmp_path / "absent")), config) == "missing_source"
    assert reason(make_sample(video, mask=None), config) == "missing_source"
    good = write_png_folder(tmp_path / "good", np.zeros((9, 48, 64), np.uint16))
    source = probe_sample(make_sample(video, mask=str(good)), config).modality_info["mask"]
    assert (source.num_frames, source.size, source.bit_depth) == (9, (64, 48), 16)
