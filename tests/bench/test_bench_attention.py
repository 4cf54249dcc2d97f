"""bench/kernels/attention.py --tiny times SDPA and single_head_attention's SDPA fallback on the CPU (no Triton
there)."""

from helpers.bench_scripts import run_tiny


def test_attention_tiny_prints_the_fallback_rows(tmp_path):
    [shape] = run_tiny("kernels/attention", tmp_path, "--reps", "2")["shapes"]
    assert (shape["frames"], shape["length"], shape["head_dim"]) == (2, 200, 128)
    assert [row["config"] for row in shape["rows"]] == ["sdpa", "single_head_attention (fallback)"]
    for row in shape["rows"]:
        assert row["error"] is None and row["same_bits_twice"] and row["ms"] > 0
        assert row["rel_l2"] < 5e-3
