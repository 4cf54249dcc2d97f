"""Masks and depth are read, sampled and normalised one source frame at a time; the result is bit for bit the
straightforward whole-clip computation (read every frame with Pillow/numpy, stack, index, convert, reduce,
normalise) on odd sizes, scales that are not whole numbers, crops, repeated frames, every source kind, and
signed zeros at the depth extremes."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from helpers.media import read_png_pillow, write_depth_npy, write_depth_npz, write_ffv1, write_png_folder
from latentforge.config import DepthConfig, MaskConfig
from latentforge.decode.resize import nearest_source_indices, plan_resize
from latentforge.decode.sources import probe_modality_source
from latentforge.errors import SampleRejected
from latentforge.transforms.depth import load_depth
from latentforge.transforms.masks import load_mask

T, W, H = 7, 37, 23  # odd width: decoded rows are padded, so id planes are strided views
INDICES = [0, 2, 2, 3, 6]  # a repeated frame, frames skipped
PLANS = {
    "cover_crop down": plan_resize(W, H, 24, 12, "cover_crop"),  # 37x23 -> 24x15, crop 3 rows
    "cover_crop up": plan_resize(W, H, 40, 40, "cover_crop"),  # 37x23 -> 64x40, crop 24 columns
    "stretch": plan_resize(W, H, 50, 31, "stretch"),
}


def whole_clip(frames: np.ndarray, plan) -> np.ndarray:
    """The window's frames sampled on the plan's grid, in C order like every clip array (fancy indexing alone
    returns another layout, and a reduction's order, so the sign of a zero extreme, follows the layout)."""
    rows, cols = nearest_source_indices(plan)
    return np.ascontiguousarray(frames[INDICES][:, rows][:, :, cols])


def reference_depth(units: np.ndarray) -> tuple[np.ndarray, float, float]:
    lo, hi = float(units.min()), float(units.max())
    if hi > lo:
        return (2.0 * (units - lo) / (hi - lo) - 1.0).astype(np.float32), lo, hi
    return np.zeros(units.shape, np.float32), lo, hi


def assert_same_depth(got, params, units: np.ndarray) -> None:
    values, lo, hi = reference_depth(units)
    assert got.values.dtype == np.float32 and got.values.tobytes() == values.tobytes()
    assert np.float64(params["lo"]).tobytes() == np.float64(lo).tobytes()  # the sign of a zero too
    assert np.float64(params["hi"]).tobytes() == np.float64(hi).tobytes()


def depth_cases(tmp_path) -> list[tuple[str, np.ndarray]]:
    """(source path, the source's depth in float64 units)."""
    rng = np.random.default_rng(3)
    signed_zeros = rng.uniform(0.5, 80.0, (T, H, W)).astype(np.float32)
    signed_zeros[rng.random((T, H, W)) < 0.2] = 0.0
    signed_zeros[rng.random((T, H, W)) < 0.2] = -0.0
    wide = rng.normal(0.0, 1e3, (T, H, W))
    codes = rng.integers(0, 65536, (T, H, W)).astype(np.uint16)
    half = wide.astype(np.float16)
    packed = tmp_path / "packed.npz"
    np.savez_compressed(packed, depth=wide)
    return [
        (str(write_depth_npz(tmp_path / "zeros.npz", signed_zeros)), signed_zeros.astype(np.float64)),
        (str(write_depth_npz(tmp_path / "fortran.npz", np.asfortranarray(signed_zeros[:, ::-1]))),
         signed_zeros[:, ::-1].astype(np.float64)),
        (str(packed), wide),
        (str(write_depth_npy(tmp_path / "half.npy", half)), half.astype(np.float64)),
        (str(write_depth_npy(tmp_path / "flat.npy", np.full((T, H, W), 2.5, np.float32))), np.full((T, H, W), 2.5)),
        (str(write_png_folder(tmp_path / "png", codes)), codes / 256.0),
    ]


@pytest.mark.parametrize("plan_name", PLANS)
def test_depth_equals_the_whole_clip_computation(tmp_path, plan_name):
    plan = PLANS[plan_name]
    for path, source_units in depth_cases(tmp_path):
        source = probe_modality_source("depth", path, "s")
        got, params = load_depth(source, INDICES, plan, DepthConfig(png_scale=256.0), "s")
        assert_same_depth(got, params, whole_clip(source_units, plan))


def test_depth_video_codes_and_non_finite_rejection_match(tmp_path):
    plan = PLANS["cover_crop down"]
    codes = np.random.default_rng(4).integers(0, 256, (T, H, W)).astype(np.uint8)
    source = probe_modality_source("depth", str(write_ffv1(tmp_path / "d.mkv", codes)), "s")
    cfg = DepthConfig(video_near=0.5, video_far=40.0)
    got, params = load_depth(source, INDICES, plan, cfg, "s")
    assert_same_depth(got, params, 0.5 + (40.0 - 0.5) * whole_clip(codes.astype(np.float64), plan) / 255.0)

    depth = np.ones((T, H, W), np.float32)
    depth[3, 5:9, 4:30] = np.nan
    depth[6, 2, 2:9] = np.inf
    kept = whole_clip(depth, plan)
    t, y, x = np.argwhere(~np.isfinite(kept))[0]
    source = probe_modality_source("depth", str(write_depth_npz(tmp_path / "nan.npz", depth)), "s")
    with pytest.raises(SampleRejected) as rejected:
        load_depth(source, INDICES, plan, DepthConfig(), "s")
    assert rejected.value.reason == "depth_not_finite"
    assert f"has {int((~np.isfinite(kept)).sum())} non-finite values" in rejected.value.detail
    assert f"at source frame {INDICES[t]}, output pixel ({x}, {y})" in rejected.value.detail


def write_palette_pngs(folder, ids: np.ndarray):
    folder.mkdir()
    for t, frame in enumerate(ids):
        image = Image.fromarray(frame, mode="P")
        image.putpalette(np.arange(768, dtype=np.uint8).tolist())
        image.save(folder / f"{t:03d}.png")
    return folder


@pytest.mark.parametrize("plan_name", PLANS)
def test_masks_equal_the_whole_clip_computation(tmp_path, plan_name):
    plan = PLANS[plan_name]
    rng = np.random.default_rng(5)
    small = rng.integers(0, 4, (T, H, W)).astype(np.uint8)
    wide = rng.choice(np.array([0, 7, 300, 65535], np.uint16), (T, H, W))
    cases = [
        (write_png_folder(tmp_path / "gray8", small), [0, 1, 2, 3]),  # a declared run: no histogram needed
        (write_png_folder(tmp_path / "gray16", wide), [0, 7, 300, 65535]),  # not a run: counted
        (write_palette_pngs(tmp_path / "palette", small), None),
        (write_ffv1(tmp_path / "ids.mkv", small), [3, 2, 1, 0, 2]),
    ]
    for path, ids in cases:
        source = probe_modality_source("mask", str(path), "s")
        if source.kind == "png_folder":
            frames = np.stack([read_png_pillow(f) for f in source.files])
        else:
            frames = small
        got, params = load_mask(source, INDICES, plan, MaskConfig(ids=ids), "s")
        kept = whole_clip(frames, plan)
        assert got.values.dtype == kept.dtype and got.values.tobytes() == kept.tobytes(), path
        assert params["ids"] == np.unique(kept).tolist(), path


def test_undeclared_ids_anywhere_in_a_source_frame_are_rejected_alike(tmp_path):
    ids = np.zeros((T, H, W), np.uint16)
    ids[2, 0, 0] = 9  # outside every crop
    ids[3, 10, 10:20] = np.arange(5, 15)
    ids[5] = 1000  # a frame the window skips
    source = probe_modality_source("mask", str(write_png_folder(tmp_path / "m", ids)), "s")
    declared = [0, 1, 2, 5, 6, 7]
    with pytest.raises(SampleRejected) as rejected:
        load_mask(source, INDICES, PLANS["cover_crop down"], MaskConfig(ids=declared), "s")
    present = np.unique(ids[INDICES])
    unknown = present[~np.isin(present, declared)]
    assert rejected.value.reason == "mask_id_out_of_range"
    assert f"holds ids {unknown[:8].tolist()} outside" in rejected.value.detail
