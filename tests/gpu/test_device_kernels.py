"""frames.resize_backend=device's Triton kernels (decode/device_kernels.py) against the eager steps they replace
(decode/device_convert.py) and against torch's own interpolate, on fresh random planes.

kernels_for() already checks the kernels once per device on one small clip (96x54, bt709 limited, i420 unrotated
and nv12 rotated 90, seed 0). These go further: both layouts with both matrices and both ranges, every rotation,
odd output sizes and crops, rows wider than one kernel block, odd chroma planes, an upscale, one axis shrinking
while the other grows, and a 720p clip converted in two chunks.

Tolerance (docs/frames.md, docs/benchmarks/builds.md): kernels and eager steps sum the same taps in the same order,
but the compiler may fuse a multiply and an add, so a value can fall one level apart, never more (2,758 of 111
million on the bench clip). A kernel that truncated instead of rounding would also stay within one level, so the
share of values apart is bounded too, at 0.1 %: 40 times the measured 0.0025 %.
"""

from __future__ import annotations

import pytest
import torch

from latentforge.decode.device_convert import (
    _chroma_tables,
    _coefficients,
    _planes,
    _resize_tables,
    kernels_for,
    resize_rgb,
    yuv_to_input,
    yuv_to_rgb,
)
from latentforge.decode.yuv_format import YuvFormat
from latentforge.tokenizers.base import pixel_table

MAX_SHARE_APART = 1e-3

# name: (format, frames). YuvFormat(layout, coded width, coded height, matrix, full range, rotation,
# scaled size of the upright frame, crop of it, filter).
FORMATS = {
    "i420 bt601 limited, downscaled to an odd crop": (
        YuvFormat("i420", 96, 54, "bt601", False, 0, (61, 35), (3, 2, 58, 33), "bicubic"), 5),
    "nv12 bt709 full, rotated 90, bilinear": (
        YuvFormat("nv12", 320, 180, "bt709", True, 90, (97, 173), (0, 1, 97, 172), "bilinear"), 3),
    "i420 bt709 limited, rotated 180, upscaled wider than a block": (
        YuvFormat("i420", 64, 48, "bt709", False, 180, (301, 227), (1, 1, 300, 226), "bicubic"), 3),
    "nv12 bt601 full, rotated 270, odd chroma planes": (
        YuvFormat("nv12", 130, 66, "bt601", True, 270, (33, 65), (0, 0, 33, 65), "bilinear"), 4),
    "i420 bt709 full, area (colour kernel, eager resize)": (
        YuvFormat("i420", 96, 64, "bt709", True, 0, (48, 32), (0, 0, 48, 32), "area"), 3),
    "i420 bt601 limited, width shrinks while height grows": (
        YuvFormat("i420", 200, 40, "bt601", False, 0, (150, 81), (0, 3, 150, 78), "bicubic"), 3),
    "nv12 bt601 limited, 720p to 480x832 in two chunks": (
        YuvFormat("nv12", 1280, 720, "bt601", False, 0, (853, 480), (10, 0, 842, 480), "bicubic"), 29),
}


@pytest.fixture(scope="module")
def device() -> torch.device:
    pytest.importorskip("triton", reason="Triton is not importable: the device backend runs its eager steps")
    device = torch.device("cuda", 0)  # as a CUDA tensor names its device
    assert kernels_for(device) is not None, "the kernels failed their own check on this device (or did not build)"
    return device


def random_planes(fmt: YuvFormat, frames: int, seed: int, device: torch.device) -> torch.Tensor:
    """uint8 [T, frame_bytes] of uniform noise: every level of Y, U and V, saturated colours included."""
    generator = torch.Generator(device=device).manual_seed(seed)
    return torch.randint(0, 256, (frames, fmt.frame_bytes), generator=generator, device=device, dtype=torch.uint8)


def input_levels(values: torch.Tensor) -> torch.Tensor:
    """The encoder's input in [-1, 1] (pixel table entries) back to integer levels 0..255."""
    return ((values + 1) * 127.5).round()


def assert_one_level_at_most(ours: torch.Tensor, reference: torch.Tensor) -> None:
    apart = (ours - reference).abs()
    share = float(apart.count_nonzero()) / apart.numel()
    assert apart.max() <= 1, f"{int((apart > 1).sum())} values more than one level apart (max {apart.max()})"
    assert share <= MAX_SHARE_APART, f"{share:.2e} of the values one level apart"


@pytest.mark.parametrize("name", list(FORMATS))
def test_kernels_convert_random_planes_as_the_eager_steps(device, name):
    fmt, frames = FORMATS[name]
    values = random_planes(fmt, frames, seed=1 + list(FORMATS).index(name), device=device)
    table = pixel_table(device)
    ours = yuv_to_input(values, fmt, table)
    eager = yuv_to_input(values, fmt, table, kernels=False)
    assert ours.shape == eager.shape == (3, frames, fmt.out_size[1], fmt.out_size[0])
    assert_one_level_at_most(input_levels(ours), input_levels(eager))


@pytest.mark.parametrize("layout", ["i420", "nv12"])
@pytest.mark.parametrize("matrix", ["bt601", "bt709"])
@pytest.mark.parametrize("full_range", [False, True], ids=["limited", "full"])
def test_colour_kernel_gives_the_eager_rgb(device, layout, matrix, full_range):
    # 514x66: luma rows span three blocks of 256, chroma planes are 257x33 (odd both ways)
    fmt = YuvFormat(layout, 514, 66, matrix, full_range, 0, (514, 66), (0, 0, 514, 66), "bicubic")
    values = random_planes(fmt, 3, seed=100, device=device)
    chroma = _chroma_tables(fmt.width, fmt.height, device)
    ours = kernels_for(device).colour(*_planes(values, fmt), _coefficients(fmt), *chroma)
    assert_one_level_at_most(ours, yuv_to_rgb(values, fmt))


# The resize alone, from random RGB levels at the upright size: name -> (size in, scaled size, crop, filter).
RESIZES = {
    "bicubic down, antialiased, odd crop": ((321, 179), (97, 55), (2, 1, 95, 54), "bicubic"),
    "bilinear down, antialiased": ((640, 360), (213, 120), (0, 0, 213, 120), "bilinear"),
    "bicubic up past a block": ((48, 36), (301, 225), (0, 0, 301, 225), "bicubic"),
    "bilinear up, odd crop": ((50, 30), (127, 77), (3, 2, 124, 75), "bilinear"),
}


@pytest.mark.parametrize("name", list(RESIZES))
def test_resize_kernels_give_torchs_interpolate(device, name):
    (width, height), scaled, crop, filter_name = RESIZES[name]
    fmt = YuvFormat("i420", width, height, "bt601", False, 0, scaled, crop, filter_name)  # only the resize reads it
    generator = torch.Generator(device=device).manual_seed(200)
    rgb = torch.randint(0, 256, (4, 3, height, width), generator=generator, device=device).float()
    out_w, out_h = fmt.out_size
    # a slice along T of a larger output, as a clip converted in chunks writes it; the rest must stay untouched
    everything = torch.full((3, 7, out_h, out_w), -5.0, device=device)
    table = pixel_table(device)
    columns, rows = _resize_tables(fmt, device)
    kernels_for(device).resize_into(everything[:, 2:6], rgb, columns, rows, table)
    expected = resize_rgb(rgb, fmt).transpose(0, 1)  # torch's interpolate on the same device, rounded, cropped
    assert_one_level_at_most(input_levels(everything[:, 2:6]), expected)
    assert (everything[:, :2] == -5).all() and (everything[:, 6:] == -5).all()
