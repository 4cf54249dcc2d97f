"""bench/conv_kernels.py --tiny times the conv through PyTorch both ways on the CPU (the frontend plans need a GPU)."""

import json
import subprocess
import sys

from helpers import REPO


def test_conv_kernels_tiny_prints_both_pytorch_rows(tmp_path):
    out = tmp_path / "kernels.json"
    done = subprocess.run([sys.executable, str(REPO / "bench" / "conv_kernels.py"), "--tiny", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    [shape] = json.loads(out.read_text())["shapes"]
    assert shape["conv"].startswith("[1,8,6,16,24] x [8,8,3,3,3]")
    assert [row["plan"] for row in shape["rows"]] == ["pytorch cuDNN, heuristics", "pytorch cuDNN, autotuned"]
    assert all(row["same_bits_twice"] and row["seconds"] > 0 for row in shape["rows"])
    assert shape["best_vs_book"] is None  # no frontend plans on the CPU
