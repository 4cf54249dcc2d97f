"""bench/kernels/conv_cutlass.py on the CPU: the CUTLASS kernels need an sm_90 GPU, so only the baseline runs, and the
script says why."""

from helpers.bench_scripts import run_tiny


def test_conv_cutlass_tiny_runs_the_baseline_and_says_why_no_kernel_ran(tmp_path):
    result = run_tiny("kernels/conv_cutlass", tmp_path)
    assert "sm_90a" in result["note"]
    [shape] = result["shapes"]
    [row] = shape["rows"]
    assert row["same_bits_twice"] and row["rel_l2_vs_fp32"] < 1e-2  # bf16 operands, the fp32 conv of the same
