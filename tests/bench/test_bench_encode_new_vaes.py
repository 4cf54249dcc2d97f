"""bench/encode/encode_new_vaes.py --tiny runs every measurement of the GPU benchmark on the CPU: latentforge and
diffusers in fp32 and bf16 on the same narrow random models, fp32 equal bit for bit."""

import json

from helpers.bench_scripts import load_bench


def test_new_vaes_bench_tiny_measures_every_mode(tmp_path):
    bench = load_bench("encode/encode_new_vaes")
    out = tmp_path / "result.json"
    assert bench.main(["--tiny", "--models", "hunyuanvideo", "ltx-video", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["errors"] == {} and "random weights" in result["weights"]
    rows = {(r["model"], r["mode"]): r for r in result["rows"]}
    modes = {f"{who} {p}" for who in ("latentforge", "diffusers") for p in ("fp32", "bf16")}
    assert set(rows) == {(m, mode) for m in ("hunyuanvideo", "ltx-video") for mode in modes}
    for (model, mode), row in rows.items():
        assert row["s_per_clip"] > 0
        if mode.endswith("fp32"):
            assert row["max_abs_vs_latentforge_fp32"] == 0.0
        else:
            assert 0 < row["rel_l2_vs_latentforge_fp32"] < 5e-2
