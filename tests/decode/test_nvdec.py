"""frames.decoder=nvdec: without a usable GPU video engine a video is rejected, never silently decoded on the
CPU; with frames.nvdec_fallback=cpu it falls back, gives the same frames, and the manifest row says which
decoder ran and why."""

import numpy as np
import pytest
import torch

from helpers.media import pattern_frames, write_video
from latentforge.config import BuildConfig, FramesConfig
from latentforge.errors import SampleRejected
from latentforge.pipeline.probe import probe_sample
from latentforge.pipeline.sample import load_sample_pixels
from latentforge.records import Sample, SourceEntry


def _config(decoder: str, fallback: str = "cpu") -> BuildConfig:
    config = BuildConfig()
    config.frames = FramesConfig(num_frames=5, height=24, width=40, decoder=decoder, nvdec_fallback=fallback)
    return config


def test_nvdec_falls_back_per_video_to_identical_cpu_frames(tmp_path):
    path = write_video(tmp_path / "clip.mp4", pattern_frames(9, 48, 64))
    sample = Sample("clip", 0, SourceEntry(key="clip", video=str(path), video_rel="clip.mp4", caption="a clip"))
    cpu = load_sample_pixels(sample, probe_sample(sample, _config("cpu")), _config("cpu"))
    nvdec = load_sample_pixels(sample, probe_sample(sample, _config("nvdec")), _config("nvdec"))
    np.testing.assert_array_equal(nvdec.modalities["rgb"].values, cpu.modalities["rgb"].values)
    assert "decoder" not in cpu.provenance
    if torch.cuda.is_available():  # a GPU machine: the hardware decoder ran, or says why it could not
        assert nvdec.provenance["decoder"] == "nvdec" or nvdec.provenance["decoder"].startswith("cpu (nvdec failed")
    else:
        assert nvdec.provenance["decoder"].startswith("cpu (nvdec failed: "), nvdec.provenance["decoder"]
        assert str(tmp_path) not in nvdec.provenance["decoder"]  # no paths in the checksummed manifest


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine where NVDEC cannot run")
def test_without_fallback_a_video_nvdec_cannot_decode_is_rejected_with_the_fix(tmp_path):
    path = write_video(tmp_path / "clip.mp4", pattern_frames(9, 48, 64))
    sample = Sample("clip", 0, SourceEntry(key="clip", video=str(path), video_rel="clip.mp4", caption="a clip"))
    config = _config("nvdec", fallback="reject")
    with pytest.raises(SampleRejected) as rejected:
        load_sample_pixels(sample, probe_sample(sample, config), config)
    assert rejected.value.reason == "decode_error"
    assert "NVDEC cannot decode it" in str(rejected.value) and "frames.nvdec_fallback=cpu" in str(rejected.value)
