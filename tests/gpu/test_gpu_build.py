"""A small GPU build through the CLI, each run its own `latentforge build` process: bench/build/determinism.py's main()
with GPU-sized arguments (as tests/bench/test_bench_determinism.py runs it with --tiny on the CPU).

Four 17x128x224 clips (two units of two), the Wan2.1 VAE at its released width with random weights, bf16 with the
fast path's defaults (recorded cuDNN plans, shared by the runs through one fresh folder of plan books). Compared by
SHA256SUMS with the first fresh build: a second fresh build, two ranks (two GPUs where there are two, else two
processes on one), and a build killed (LATENTFORGE_FAULT=stage:2, SIGKILL at its second staged unit) then
resumed by the same command, which must all be equal (docs/tokenizers.md, docs/benchmarks/fast-encoder.md
"Determinism with the defaults"); and `latentforge verify --deep` of the first, which must re-encode bit for bit
("exact"). The bench's own-plans build (its own empty plans folder, so it may pick other plans) must build; its
bytes may differ. The builds' default kernels, recorded plans, need the cuDNN frontend: without it the test skips.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from helpers import REPO

pytestmark = pytest.mark.slow  # whole builds in subprocesses

REPLAYED = ("fresh-1", "fresh-2", "ranks-2", "killed+resumed")


def test_gpu_builds_give_one_sha256sums_and_deep_verify_is_exact(cudnn_frontend, tmp_path):
    spec = importlib.util.spec_from_file_location("bench_determinism", REPO / "bench" / "build" / "determinism.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "result.json"
    code = bench.main(["--device", "cuda", "--clips", "4", "--frames", "17", "--height", "128", "--width", "224",
                       "--spot", "2", "--workdir", str(tmp_path / "work"), "--out", str(out)])
    result = json.loads(out.read_text())
    runs = {row["run"]: row for row in result["runs"]}
    assert sorted(runs) == sorted([*REPLAYED, "own-plans"])
    for name in REPLAYED:
        assert runs[name]["exit"] == 0 and runs[name]["equals_fresh_1"], (name, runs[name])
    assert "exit -9" in runs["killed+resumed"]["note"]  # the kill really happened before the resume
    assert runs["own-plans"]["exit"] == 0, runs["own-plans"]["stderr"]
    assert result["conv_plans"], "the cache records no conv plans: the builds ran no recorded cuDNN plans"
    deep = result["deep_verify"]
    assert deep["ok"] and deep["comparison"].startswith("exact"), deep
    assert code == 0
