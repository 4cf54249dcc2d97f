"""bench/first_conv.py --tiny: on the CPU (no Triton kernel there) it times the stacked path the GPU kernel
replaced, checks it against an fp32 conv and for the same bits twice, and writes its table as JSON."""

import json
import subprocess
import sys

from helpers import REPO


def test_first_conv_bench_tiny_times_the_stacked_path(tmp_path):
    out = tmp_path / "first_conv.json"
    done = subprocess.run([sys.executable, str(REPO / "bench" / "first_conv.py"), "--tiny", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["device"] == "cpu" and result["window"] == [3, 16, 24]
    [row] = result["rows"]
    assert row["mode"].startswith("before: stacked frames") and row["same_bits_twice"] and row["ms"] > 0
    assert 0 < row["rel_l2_vs_fp32"] < 1e-2  # bf16 operands and output against an fp32 conv of the fp32 weights
    assert row["mode"] in done.stdout
