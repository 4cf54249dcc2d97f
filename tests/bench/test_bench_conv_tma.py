"""bench/conv_tma.py: its sweep tiles every shape it times exactly and its labels read back; without Triton it
says so and stops; where Triton imports, the TMA kernel through the interpreter matches an fp32 conv (border taps
read as zeros) and its fused epilogue gives the separate pass's sum."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from helpers import REPO
from helpers.bench_scripts import load_bench

BENCH = REPO / "bench" / "conv_tma.py"


def _bench():
    return load_bench("conv_tma")


def test_sweep_tiles_each_shape_exactly_and_labels_read_back():
    bench = _bench()
    for text in bench.DEFAULT_SHAPES:
        channels, out_channels = (int(v) for v in text.split(",")[:2])
        configs = bench.sweep(channels, out_channels)
        assert len(configs) >= 8 and len(set(configs)) == len(configs), text
        for config in configs:
            assert bench.TmaConfig.parse(config.label) == config
            assert sum(config.n_split) == out_channels and channels % sum(config.k_split) == 0
            assert config.bh * config.bw in (128, 256) and config.num_warps == config.bh * config.bw // 32
    for label in bench.TINY_CONFIGS:
        assert bench.TmaConfig.parse(label).label == label


@pytest.mark.skipif(importlib.util.find_spec("triton") is not None, reason="triton is installed")
def test_without_triton_it_says_so_and_stops():
    done = subprocess.run([sys.executable, str(BENCH), "--tiny"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "triton is not importable" in done.stderr


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")
def test_tiny_under_the_interpreter_matches_fp32_and_the_separate_pass(tmp_path):
    out = tmp_path / "tma.json"
    done = subprocess.run([sys.executable, str(BENCH), "--tiny", "--out", str(out)], capture_output=True, text=True,
                          timeout=900, env=dict(os.environ, TRITON_INTERPRET="1"))
    assert done.returncode == 0, done.stderr
    [shape] = json.loads(out.read_text())["shapes"]
    kernels = [row for row in shape["rows"][1:]]
    assert len(kernels) == 3 and all("error" not in row for row in kernels), kernels
    for row in kernels:  # the interpreter truncates the bf16 store: about 2**-8 relative
        assert row["same_bits_twice"] and row["rel_l2_vs_fp32"] < 6e-3, row
    fused = [row for row in shape["fused"] if row["run"].endswith(" fused")]
    assert len(fused) == 4 and all(row["same_bits_twice"] for row in fused), fused
    assert all(row["sum_equal"] for row in fused if row["sum_equal"] is not None)
    assert all(row["norm_max_abs_diff"] <= 2**-5 for row in fused)  # a last-bit difference (values below 8)
