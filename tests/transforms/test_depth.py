"""Depth: stored values invert, with the row's lo/hi, to the source depth sampled nearest-neighbour by
scikit-image (npz and 16-bit PNG); NaN is rejected."""

from __future__ import annotations

import numpy as np
import pytest
from skimage.transform import resize as skimage_resize

from helpers.media import pattern_frames, write_depth_npy, write_depth_npz, write_png_folder, write_video
from latentforge.config import BuildConfig, FramesConfig
from latentforge.errors import SampleRejected
from latentforge.pipeline.probe import probe_sample
from latentforge.pipeline.sample import load_sample_pixels
from latentforge.records import Sample, SourceEntry

W, H, T = 65, 49, 9


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    return write_video(tmp_path_factory.mktemp("depth") / "v.mp4", pattern_frames(T, W, H), pix_fmt="yuv444p")


def run(video, depth_path, png_scale=1000.0):
    config = BuildConfig()
    config.frames = FramesConfig(num_frames=5, height=24, width=40, resize="cover_crop", window="random")
    config.modalities.names = ["rgb", "depth"]
    config.modalities.depth.png_scale = png_scale
    entry = SourceEntry(key="d", video=str(video), video_rel="v.mp4", caption="c", depth=str(depth_path))
    sample = Sample(sample_id="d", source_index=0, entry=entry)
    return load_sample_pixels(sample, probe_sample(sample, config), config)


def check_inverts(pixels, source_depth):
    stored = pixels.modalities["depth"].expanded()
    assert stored.dtype == np.float32 and stored.shape == (5, 24, 40, 3)
    assert stored.min() >= -1 and stored.max() <= 1
    np.testing.assert_array_equal(stored[..., 0], stored[..., 2])
    params = pixels.provenance["depth"]
    restored = params["lo"] + (stored[..., 0].astype(np.float64) + 1) / 2 * (params["hi"] - params["lo"])
    expected = np.stack(
        [
            skimage_resize(source_depth[i], (30, 40), order=0, preserve_range=True, anti_aliasing=False)[3:27]
            for i in pixels.provenance["frame_indices"]
        ]
    )
    np.testing.assert_allclose(restored, expected, rtol=0, atol=(params["hi"] - params["lo"]) * 1e-6)
    assert params["lo"] == pytest.approx(expected.min()) and params["hi"] == pytest.approx(expected.max())


def test_npz_depth_inverts_with_row_params(tmp_path, video):
    depth = np.random.default_rng(0).uniform(0.5, 80.0, (T, H, W)).astype(np.float32)
    pixels = run(video, write_depth_npz(tmp_path / "d.npz", depth))
    assert pixels.provenance["depth"]["source_kind"] == "npz"
    check_inverts(pixels, depth.astype(np.float64))


def test_16bit_png_depth_inverts_with_row_params(tmp_path, video):
    codes = np.random.default_rng(1).integers(0, 65536, (T, H, W)).astype(np.uint16)
    pixels = run(video, write_png_folder(tmp_path / "depth", codes), png_scale=256.0)
    check_inverts(pixels, codes.astype(np.float64) / 256.0)


def test_nan_depth_is_rejected(tmp_path, video):
    depth = np.ones((T, H, W), np.float32)
    depth[:, 20:30, 20:40] = np.nan
    with pytest.raises(SampleRejected) as rejected:
        run(video, write_depth_npy(tmp_path / "d.npy", depth))
    assert rejected.value.reason == "depth_not_finite"


def test_npz_members_read_by_memory_map_equal_numpy_load(tmp_path):
    """Uncompressed .npz members are memory-mapped (only the used frames are read); compressed ones are loaded;
    both give numpy's own values, C or Fortran order."""
    from latentforge.decode.sources import ModalitySource
    from latentforge.transforms.depth import source_frames, stored_npz_member

    rng = np.random.default_rng(5)
    depth = rng.uniform(0.5, 9.0, (7, 6, 10)).astype(np.float32)
    cases = {"plain.npz": (np.savez, depth), "fortran.npz": (np.savez, np.asfortranarray(depth)),
             "packed.npz": (np.savez_compressed, depth)}
    indices = [5, 1, 1, 6]
    for name, (save, array) in cases.items():
        path = tmp_path / name
        save(path, depth=array, other=np.arange(3))
        source = ModalitySource("depth", "npz", str(path), 7, (10, 6), array_name="depth")
        with np.load(path) as archive:
            expected = archive["depth"][indices]
        frames = dict(source_frames(source, indices, "s"))
        assert sorted(frames) == sorted(set(indices)), name
        assert np.array_equal(np.stack([frames[i] for i in indices]), expected), name
        assert (stored_npz_member(str(path), "depth") is None) == (name == "packed.npz"), name
