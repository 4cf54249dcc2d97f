"""bench/encode/encode_cosmos.py --tiny runs every measurement of the GPU benchmark on the CPU (fp32: bf16 is CUDA
only)."""

import importlib.util
import json

import pytest

from helpers import REPO

pytestmark = pytest.mark.slow  # two fresh processes import torch and diffusers: tens of seconds on a shared CPU

BENCH = REPO / "bench" / "encode" / "encode_cosmos.py"


def test_cosmos_bench_tiny_measures_every_mode_and_agrees_with_diffusers(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("bench_encode_cosmos", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "result.json"
    assert bench.main(["--tiny", "--out", str(out)]) == 0

    result = json.loads(out.read_text())
    assert result["errors"] == {}
    assert set(result["machine"]) >= {"device", "torch", "cuda", "cudnn", "diffusers"}
    assert "random weights" in result["weights"]
    assert "bf16" in result["skipped"]  # CPU: fp32 only, and said so
    assert any("Cosmos-Tokenizer" in what for what in result["skipped"])  # no --cosmos-reference given
    rows = {(r["model"], r["mode"]): r for r in result["rows"]}
    assert set(rows) == {("cosmos-cv8x8x8", "latentforge fp32"), ("cosmos-cv8x8x8", "diffusers fp32"),
                         ("cosmos-dv8x16x16", "latentforge fp32")}
    for row in rows.values():
        assert row["s_per_clip"] > 0 and row["reps"] == 1
    diffusers_fp32 = rows[("cosmos-cv8x8x8", "diffusers fp32")]
    assert diffusers_fp32["output_shape"] == [1, 16, 2, 2, 3]
    # docs/tokenizers.md: they differ only by diffusers' F.silu and SDPA rounding (width 2: rel-L2 5.6e-7)
    assert diffusers_fp32["rel_l2_vs_latentforge_fp32"] <= 1e-6
    assert diffusers_fp32["max_abs_vs_latentforge_fp32"] <= 2e-6
    assert rows[("cosmos-dv8x16x16", "latentforge fp32")]["output_shape"] == [1, 2, 2, 3]  # token ids
    for model in ("cosmos-cv8x8x8", "cosmos-dv8x16x16"):
        fresh = result["fresh_processes"][model]
        assert len(fresh["sha256"]) == 2 and fresh["same_bits"] and fresh["same_as_bench_process"]
    assert "s/clip" in capsys.readouterr().out
