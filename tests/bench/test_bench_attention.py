"""bench/attention.py --tiny times SDPA and single_head_attention's SDPA fallback on the CPU (no Triton there)."""

import json
import subprocess
import sys

from helpers import REPO


def test_attention_tiny_prints_the_fallback_rows(tmp_path):
    out = tmp_path / "attention.json"
    done = subprocess.run([sys.executable, str(REPO / "bench" / "attention.py"), "--tiny", "--reps", "2", "--out",
                           str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    [shape] = json.loads(out.read_text())["shapes"]
    assert (shape["frames"], shape["length"], shape["head_dim"]) == (2, 200, 128)
    assert [row["config"] for row in shape["rows"]] == ["sdpa", "single_head_attention (fallback)"]
    for row in shape["rows"]:
        assert row["error"] is None and row["same_bits_twice"] and row["ms"] > 0
        assert row["rel_l2"] < 5e-3
