"""Masks: ids survive nearest-neighbour cover_crop exactly, colours follow docs/modalities.md, bad sources
are rejected. References: Pillow writes the PNGs, scikit-image resamples, the doc's formula and table."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from skimage.transform import resize as skimage_resize

from helpers import REPO
from helpers.media import pattern_frames, write_ffv1, write_png_folder, write_video
from latentforge.config import BuildConfig, FramesConfig
from latentforge.errors import SampleRejected
from latentforge.pipeline.probe import probe_sample
from latentforge.pipeline.sample import load_sample_pixels
from latentforge.records import Sample, SourceEntry
from latentforge.transforms.masks import palette_colours

DOC = REPO / "docs" / "modalities.md"
SOURCE_IDS = np.array([0, 7, 300, 65535], np.uint16)
W, H, T = 65, 49, 9  # odd sizes: no nearest-neighbour ties


def doc_table() -> dict[int, tuple[int, int, int]]:
    rows = re.findall(r"^\| (\d+) \| (\d+) \| (\d+) \| (\d+) \|$", DOC.read_text(), flags=re.M)
    return {int(i): (int(r), int(g), int(b)) for i, r, g, b in rows}


def doc_colour_to_id(rgb: np.ndarray) -> np.ndarray:
    """Invert the documented formula: c = id * 0x9E3779 mod 2^24 -> id = c * inverse mod 2^24."""
    code = (rgb[..., 0].astype(np.int64) << 16) | (rgb[..., 1].astype(np.int64) << 8) | rgb[..., 2]
    return (code * pow(0x9E3779, -1, 1 << 24)) % (1 << 24)


def config_for(ids=None) -> BuildConfig:
    config = BuildConfig()
    config.frames = FramesConfig(num_frames=5, height=24, width=40, resize="cover_crop", window="center")
    config.modalities.names = ["rgb", "mask"]
    config.modalities.mask.ids = ids
    return config


def sample_for(video: Path, mask: Path) -> Sample:
    entry = SourceEntry(key="m", video=str(video), video_rel=video.name, caption="c", mask=str(mask))
    return Sample(sample_id="m", source_index=0, entry=entry)


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    return write_video(tmp_path_factory.mktemp("mask") / "v.mp4", pattern_frames(T, W, H), pix_fmt="yuv444p")


def random_ids(values, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).choice(values, size=(T, H, W)).astype(values.dtype)


def test_doc_table_equals_palette_and_ids_stay_distinct():
    table = doc_table()
    assert len(table) >= 16 and table[0] == (0, 0, 0)
    ids = np.array(sorted(table))
    np.testing.assert_array_equal(palette_colours(ids), np.array([table[i] for i in ids]))
    every = palette_colours(np.arange(1 << 16))
    assert len(np.unique(every, axis=0)) == 1 << 16


def test_16bit_png_ids_survive_cover_crop(tmp_path, video):
    ids = random_ids(SOURCE_IDS)
    mask_dir = write_png_folder(tmp_path / "mask", ids)
    config = config_for([0, 7, 300, 65535])
    sample = sample_for(video, mask_dir)
    pixels = load_sample_pixels(sample, probe_sample(sample, config), config)
    mask = pixels.modalities["mask"].expanded()
    assert mask.dtype == np.uint8 and mask.shape == (5, 24, 40, 3)
    stored_ids = doc_colour_to_id(mask)
    assert set(np.unique(stored_ids)) <= set(SOURCE_IDS.tolist())
    # scikit-image nearest-neighbour to the cover size (40x30 for 65x49), then the centre crop.
    for out, index in zip(stored_ids, pixels.provenance["frame_indices"]):
        ref = skimage_resize(ids[index], (30, 40), order=0, preserve_range=True, anti_aliasing=False)[3:27]
        np.testing.assert_array_equal(out, ref)
    assert pixels.provenance["mask"]["ids"] == sorted(np.unique(stored_ids).tolist())


def test_ffv1_8bit_mask_video_ids_exact(tmp_path, video):
    ids = random_ids(np.array([0, 1, 2, 200], np.uint8), seed=1)
    config = config_for()
    sample = sample_for(video, write_ffv1(tmp_path / "mask.mkv", ids))
    pixels = load_sample_pixels(sample, probe_sample(sample, config), config)
    for out, index in zip(doc_colour_to_id(pixels.modalities["mask"].expanded()), pixels.provenance["frame_indices"]):
        ref = skimage_resize(ids[index], (30, 40), order=0, preserve_range=True, anti_aliasing=False)[3:27]
        np.testing.assert_array_equal(out, ref)


def test_lossy_mask_video_is_rejected(tmp_path, video):
    lossy = write_video(tmp_path / "mask.mp4", pattern_frames(T, W, H), pix_fmt="yuv444p")
    with pytest.raises(SampleRejected) as rejected:
        probe_sample(sample_for(video, lossy), config_for())
    assert rejected.value.reason == "lossy_mask_source"
    assert "h264" in rejected.value.detail


def test_ids_outside_the_declared_set_are_rejected(tmp_path, video):
    mask_dir = write_png_folder(tmp_path / "mask", random_ids(SOURCE_IDS))
    config = config_for([0, 7, 300])
    sample = sample_for(video, mask_dir)
    with pytest.raises(SampleRejected) as rejected:
        load_sample_pixels(sample, probe_sample(sample, config), config)
    assert rejected.value.reason == "mask_id_out_of_range"
    assert "65535" in rejected.value.detail
