"""bench/conv_stacked.py: each layout of the causal conv computes F.conv3d's result (CPU, fp32)."""

import torch
import torch.nn.functional as F

from helpers.bench_scripts import load_bench, run_tiny


def test_conv_stacked_tiny_layouts_match_conv3d(tmp_path):
    [shape] = run_tiny("conv_stacked", tmp_path)["shapes"]
    assert shape["conv"].startswith("[1,8,6,6,10] x [16,8,3,3,3]")
    assert list(shape["layouts"]) == ["3-D", "2-D stacked", "2-D on time-inner memory", "3-D on time-inner memory"]
    for rows in shape["layouts"].values():
        assert rows[0]["rel_l2_vs_fp32"] < 1e-6 and rows[0]["max_abs_vs_conv3d"] < 1e-5


def test_stacked_weight_order_is_what_makes_the_2d_conv_equal():
    bench = load_bench("conv_stacked")
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(1, 4, 5, 6, 7, generator=generator).contiguous(memory_format=torch.channels_last_3d)
    w = torch.randn(8, 4, 3, 3, 3, generator=generator)
    reference = F.conv3d(x, w, None, padding=(0, 1, 1))
    right = bench.as_3d(F.conv2d(bench.stacked_input(x), bench.stacked_weight(w), None, padding=1))
    wrong = bench.as_3d(F.conv2d(bench.stacked_input(x), w.reshape(8, 12, 3, 3), None, padding=1))
    assert bench.rel_l2(right, reference) < 1e-6
    assert bench.rel_l2(wrong, reference) > 0.5  # channels in (c, dt) order instead of (dt, c)


def test_time_inner_stacked_is_a_view_of_the_same_memory():
    bench = load_bench("conv_stacked")
    x = torch.arange(2 * 5 * 3 * 4, dtype=torch.float32).reshape(1, 2, 5, 3, 4)
    inner = bench.time_inner(x)
    view = bench.time_inner_stacked(inner)
    assert torch.equal(inner, x) and view.data_ptr() == inner.data_ptr()
    assert view.shape == (3, 6, 3, 4) and view.stride()[0] < view.shape[1]  # images overlap: no copy
    assert torch.equal(view, bench.stacked_input(x))
