"""bench/conv_cutlass.py on the CPU: the CUTLASS kernels need an sm_90 GPU, so only the baseline runs, and the
script says why; the C interface's errors are named."""

import json
import subprocess
import sys

import pytest

from helpers import REPO
from helpers.bench_scripts import load_bench


def test_conv_cutlass_tiny_runs_the_baseline_and_says_why_no_kernel_ran(tmp_path):
    out = tmp_path / "cutlass.json"
    done = subprocess.run([sys.executable, str(REPO / "bench" / "conv_cutlass.py"), "--tiny", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert "sm_90a" in result["note"]
    [shape] = result["shapes"]
    [row] = shape["rows"]
    assert row["same_bits_twice"] and row["rel_l2_vs_fp32"] < 1e-2  # bf16 operands, the fp32 conv of the same


def test_a_failing_config_names_itself_and_the_reason():
    bench = load_bench("conv_cutlass")
    with pytest.raises(RuntimeError, match="m128_n96_k64_c1: the config cannot run this problem"):
        bench.CutlassConvs._check(1, "m128_n96_k64_c1")
    bench.CutlassConvs._check(0, "m128_n96_k64_c1")
