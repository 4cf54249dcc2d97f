"""frames.resize_backend=device: decode workers ship 8-bit 4:2:0 planes, the device converts, rotates, resizes and
crops them. Checked against the torch backend on the same clip (same steps, swscale's rgb24 conversion on the CPU)
and, before the resize, against swscale's own rgb24 conversion called straight through PyAV."""

from __future__ import annotations

import dataclasses

import av
import numpy as np
import pytest
import torch
from av.video.reformatter import Interpolation

from helpers.media import pattern_frames, write_video
from latentforge.config import BuildConfig, FramesConfig
from latentforge.decode.device_convert import yuv_to_rgb
from latentforge.decode.modality_frames import ModalityFrames
from latentforge.errors import SampleRejected
from latentforge.pipeline.probe import probe_sample
from latentforge.pipeline.sample import load_sample_pixels
from latentforge.records import Sample, SourceEntry
from latentforge.tokenizers.base import frames_to_input

# docs/frames.md: the torch backend's RGB24 comes from swscale with its default filter and these flags.
SWSCALE = Interpolation.BICUBIC | Interpolation.ACCURATE_RND | Interpolation.FULL_CHR_H_INT | Interpolation.BITEXACT


def make_config(**frames) -> BuildConfig:
    config = BuildConfig()
    config.frames = FramesConfig(**{"num_frames": 5, "height": 24, "width": 40, **frames})
    return config


def make_sample(path) -> Sample:
    return Sample("clip", 0, SourceEntry(key="clip", video=str(path), video_rel=path.name, caption="a clip"))


def levels(config: BuildConfig, sample: Sample) -> torch.Tensor:
    """The sample's RGB as the tokenizer gets it, back in uint8 levels."""
    frames = load_sample_pixels(sample, probe_sample(sample, config), config).modalities["rgb"]
    return (frames_to_input([frames], "cpu")[0] + 1) * 127.5


SOURCES = {  # name: (writer keywords, frames settings)
    "bt601 limited": ({}, {}),
    "bt709 limited": ({"colorspace": "ITU709"}, {}),
    "bt709 full": ({"colorspace": "ITU709", "full_range": True}, {}),
    "bt601 full, untagged matrix": ({"full_range": True}, {}),
    "rotated 90": ({"rotation": 90}, {}),
    "rotated 270, stretch bilinear": ({"rotation": 270}, {"resize": "stretch", "resize_filter": "bilinear"}),
    "cover_crop area": ({}, {"resize_filter": "area"}),
    "upscale bicubic": ({}, {"height": 64, "width": 96}),
}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_device_backend_within_one_level_of_the_torch_backend(tmp_path, name):
    writer, frames = SOURCES[name]
    path = write_video(tmp_path / "clip.mp4", pattern_frames(7, 64, 48, seed=5), **writer)
    sample = make_sample(path)
    device = levels(make_config(resize_backend="device", **frames), sample)
    torch_backend = levels(make_config(resize_backend="torch", **frames), sample)
    difference = (device - torch_backend).abs().round()
    # Measured: max 1, mean 0.004-0.015 (a rounding tie of the conversion falling the other way).
    assert difference.max() <= 1 and difference.mean() < 0.03, (difference.max(), difference.mean())


@pytest.mark.parametrize(("writer", "matrix"), [({}, "ITU601"), ({"colorspace": "ITU709"}, "ITU709"),
                                                ({"colorspace": "ITU709", "full_range": True}, "ITU709")])
def test_conversion_at_source_size_matches_swscale_rgb24(tmp_path, writer, matrix):
    path = write_video(tmp_path / "clip.mp4", pattern_frames(5, 96, 64, seed=2), **writer)
    config = make_config(resize_backend="device")
    sample = make_sample(path)
    frames = load_sample_pixels(sample, probe_sample(sample, config), config).modalities["rgb"]
    ours = yuv_to_rgb(torch.from_numpy(frames.values), frames.yuv).permute(0, 2, 3, 1).numpy()
    with av.open(str(path)) as container:
        decoded = list(container.decode(video=0))[:5]
    src_range = "JPEG" if writer.get("full_range") else "MPEG"
    swscale = np.stack([f.reformat(format="rgb24", src_colorspace=matrix, src_color_range=src_range,
                                   dst_color_range="JPEG", interpolation=SWSCALE).to_ndarray() for f in decoded])
    difference = np.abs(ours.astype(int) - swscale.astype(int))
    # Measured: mean about 0.01; 1 level apart except a few pixels at saturated colour edges in the third row,
    # where swscale's vertical chroma filter meets the top edge otherwise (up to 3 levels).
    assert difference.mean() < 0.02, difference.mean()
    assert difference[:, 3:].max() <= 1 and difference.max() <= 3, np.argwhere(difference > 1)[:5]


def test_the_row_says_the_device_backend_ran(tmp_path):
    path = write_video(tmp_path / "clip.mp4", pattern_frames(7, 64, 48))
    config = make_config(resize_backend="device")
    sample = make_sample(path)
    pixels = load_sample_pixels(sample, probe_sample(sample, config), config)
    assert pixels.provenance["resize_backend"] == "device"
    rgb = pixels.modalities["rgb"]
    assert rgb.yuv.layout == "i420" and rgb.values.shape == (5, 64 * 48 * 3 // 2)
    swscale = make_config()
    assert "resize_backend" not in load_sample_pixels(sample, probe_sample(sample, swscale), swscale).provenance


@pytest.mark.parametrize(("writer", "size", "phrase"), [
    ({"pix_fmt": "yuv420p10le"}, (64, 48), "pixel format yuv420p10le is not 8-bit YUV 4:2:0"),
    ({"pix_fmt": "yuv444p"}, (64, 48), "pixel format yuv444p is not 8-bit YUV 4:2:0"),
    ({"codec": "ffv1"}, (65, 49), "coded size 65x49 is odd"),
])
def test_sources_the_device_cannot_convert_are_rejected_with_the_fix(tmp_path, writer, size, phrase):
    path = write_video(tmp_path / "clip.mkv", pattern_frames(7, *size), **writer)
    config = make_config(resize_backend="device")
    with pytest.raises(SampleRejected) as rejected:
        probe_sample(make_sample(path), config)
    assert rejected.value.reason == "decode_error" and rejected.value.sample_id == "clip"
    assert phrase in rejected.value.detail and "frames.resize_backend=swscale" in rejected.value.detail


def test_nv12_planes_convert_exactly_as_the_same_i420_planes(tmp_path):
    """NVDEC's copy-back gives nv12: the same pixels with U and V interleaved must give the same frames."""
    path = write_video(tmp_path / "clip.mp4", pattern_frames(7, 64, 48, seed=1), rotation=90)
    config = make_config(resize_backend="device")
    sample = make_sample(path)
    i420 = load_sample_pixels(sample, probe_sample(sample, config), config).modalities["rgb"]
    luma, chroma = 64 * 48, 32 * 24
    values = i420.values.copy()
    values[:, luma:] = np.stack([i420.values[:, luma : luma + chroma], i420.values[:, luma + chroma :]], -1).reshape(
        len(values), 2 * chroma)
    nv12 = ModalityFrames(values, yuv=dataclasses.replace(i420.yuv, layout="nv12"))
    assert torch.equal(frames_to_input([nv12], "cpu"), frames_to_input([i420], "cpu"))
