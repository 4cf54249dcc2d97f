"""bench/kernels/conv_triton.py: --tiny runs on the CPU (the reference only, where Triton is absent or not
interpreting), its config sweep covers every encoder conv exactly, and, where Triton imports, the implicit-GEMM
kernel run through Triton's interpreter matches an fp32 conv on small shapes (partial position tiles, border taps,
batch 2, output channels split 32 + 16 or over several N programs, K steps of one or two widths)."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from helpers import REPO
from helpers.bench_scripts import load_bench

BENCH = REPO / "bench" / "kernels" / "conv_triton.py"


def _bench():
    return load_bench("kernels/conv_triton")


def test_conv_triton_tiny_runs_the_reference(tmp_path):
    out = tmp_path / "triton.json"
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, str(BENCH), "--tiny", "--out", str(out)], capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    [shape] = result["shapes"]
    assert shape["conv"].startswith("[1,32,5,9,13] x [48,32,3,3,3]")
    assert shape["triton_note"] and "only the reference runs" in shape["triton_note"]
    assert shape["triton_note"] in done.stdout
    [row] = shape["rows"]  # no kernel rows without the interpreter
    assert row["config"] == "torch F.conv3d (CPU)" and row["same_bits_twice"] and row["seconds"] > 0
    assert 0 < row["rel_l2_vs_fp32"] < 1e-2
    assert result["matmul_tflops"] is None


def test_sweep_covers_every_encoder_conv_exactly():
    bench = _bench()
    for text in bench.DEFAULT_SHAPES:
        shape = bench.ConvShape.parse(text)
        configs = bench.sweep(shape.channels, shape.out_channels)
        assert 6 <= len(configs) <= 10, text
        for config in configs:
            config.check(shape.channels, shape.out_channels)
            assert bench.ConvConfig.parse(config.label) == config
            assert config.block_m >= 64 and config.num_warps in (4, 8)  # what wgmma needs
    whole = bench.sweep(96, 96)[0]
    assert whole.n_split == (64, 32) and sum(whole.k_split) in (32, 96)
    with pytest.raises(ValueError):
        bench.ConvConfig(128, (32,), (64, 16)).check(96, 96)  # 80 does not divide 96
    with pytest.raises(ValueError):
        bench.ConvConfig(128, (48,), (64, 32)).check(96, 96)  # 48 is no power of two


def test_weight_taps_is_tap_major():
    bench = _bench()
    import torch

    weight = torch.randn(6, 4, 3, 3, 3)
    taps = bench.weight_taps(weight)
    assert taps.shape == (27, 4, 6) and taps.is_contiguous()
    assert torch.equal(taps[9 * 2 + 3 * 0 + 1], weight[:, :, 2, 0, 1].T)


# Cases for the interpreter: (batch, input channels, output channels, output frames, height, width, config).
_CASES = [
    (2, 32, 48, 1, 5, 7, "m16_k16_n32+16_g2_w4_s2"),  # batch 2, 35 positions a frame: a partial third tile
    (1, 48, 32, 2, 4, 5, "m16_k32+16_n32_g3_w4_s2"),  # K step of two widths (one whole tap), group > frames
    (1, 16, 64, 3, 3, 3, "m32_k16_n16_g2_w4_s2"),  # 4 N programs; every position is on a border; last group 1
]

_INTERPRETED = """
import importlib.util, json, sys
import torch
spec = importlib.util.spec_from_file_location("bench_conv_triton", sys.argv[1])
bench = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = bench
spec.loader.exec_module(bench)
assert bench.interpreting()
results = []
for batch, channels, out_channels, frames, height, width, label in json.loads(sys.argv[2]):
    shape = bench.ConvShape(channels, out_channels, frames, height, width, batch)
    x, w = bench.conv_inputs(shape, torch.device("cpu"))
    reference = bench.fp32_reference(x, w)
    taps = bench.weight_taps(w)
    first = bench.conv3d_causal(x, taps, bench.ConvConfig.parse(label))
    second = bench.conv3d_causal(x, taps, bench.ConvConfig.parse(label))
    close = torch.allclose(first.float(), reference, rtol=1.6e-2, atol=2e-2)
    results.append({"label": label, "shape": list(first.shape), "reference_shape": list(reference.shape),
                    "channels_last": first.is_contiguous(memory_format=torch.channels_last_3d),
                    "close": close, "rel_l2": bench.rel_l2(first, reference),
                    "max_abs": float((first.float() - reference).abs().max()),
                    "same_bits_twice": torch.equal(first, second)})
print(json.dumps(results))
"""


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")
def test_kernel_matches_fp32_conv_under_the_interpreter():
    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, "-c", _INTERPRETED, str(BENCH), json.dumps(_CASES)], capture_output=True,
                          text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(results) == len(_CASES)
    for result in results:
        assert result["shape"] == result["reference_shape"], result
        assert result["channels_last"] and result["same_bits_twice"], result
        # The interpreter may truncate the bf16 store instead of rounding it: about 2**-8 relative either way.
        assert result["close"] and result["rel_l2"] < 6e-3, result
