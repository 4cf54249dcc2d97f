"""bench/encode/encode.py --tiny runs every code path of the GPU benchmark on the CPU."""

import importlib.util

import pytest

from helpers import REPO

pytestmark = pytest.mark.slow  # a long end-to-end run; -m 'not slow' leaves it out

BENCH = REPO / "bench" / "encode" / "encode.py"


def test_encode_bench_tiny_runs_and_reports_accuracy(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("bench_encode", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "result.json"
    assert bench.main(["--tiny", "--out", str(out)]) == 0
    import json

    result = json.loads(out.read_text())
    rows = {r["mode"]: r for r in result["rows"] if r["rel_l2_vs_fp32"] is not None}
    assert rows["diffusers fp32 (TF32 off)"]["rel_l2_vs_fp32"] == 0.0
    assert rows["latentforge fp32 (exact)"]["max_abs_vs_fp32"] == 0.0  # bit-identical to diffusers fp32
    fast = rows["latentforge bf16 (build path, 24 GiB)"]
    assert 0 < fast["rel_l2_vs_fp32"] <= rows["diffusers bf16"]["rel_l2_vs_fp32"]
    assert all(r["deterministic"] for r in rows.values())
    assert abs(bench.encoder_flops(93, 480, 832) / 1e12 - 187.9) < 0.05  # formats.md §7
    assert "s/clip" in capsys.readouterr().out
