"""bench/first_conv.py --tiny: on the CPU (no Triton kernel there) it times the stacked path the GPU kernel
replaced, checks it against an fp32 conv and for the same bits twice, and writes its table as JSON."""

import importlib.util
import json

from helpers import REPO


def test_first_conv_bench_tiny_times_the_stacked_path(tmp_path, capsys):
    # the script's main() here, as tests/bench/test_bench_encode.py runs its bench: a process of its own would only
    # import torch and diffusers again
    spec = importlib.util.spec_from_file_location("bench_first_conv", REPO / "bench" / "first_conv.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "first_conv.json"
    assert bench.main(["--tiny", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    result = json.loads(out.read_text())
    assert result["device"] == "cpu" and result["window"] == [3, 16, 24]
    [row] = result["rows"]
    assert row["mode"].startswith("before: stacked frames") and row["same_bits_twice"] and row["ms"] > 0
    assert 0 < row["rel_l2_vs_fp32"] < 1e-2  # bf16 operands and output against an fp32 conv of the fp32 weights
    assert row["mode"] in printed
