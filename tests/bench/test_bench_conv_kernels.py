"""bench/kernels/conv_kernels.py --tiny times the conv through PyTorch both ways on the CPU (the frontend plans need
a GPU)."""

from helpers.bench_scripts import run_tiny


def test_conv_kernels_tiny_prints_both_pytorch_rows(tmp_path):
    [shape] = run_tiny("kernels/conv_kernels", tmp_path)["shapes"]
    assert shape["conv"].startswith("[1,8,6,16,24] x [8,8,3,3,3]")
    assert [row["plan"] for row in shape["rows"]] == ["pytorch cuDNN, heuristics", "pytorch cuDNN, autotuned"]
    assert all(row["same_bits_twice"] and row["seconds"] > 0 for row in shape["rows"])
    assert shape["best_vs_book"] is None  # no frontend plans on the CPU
