"""bench/build/determinism.py --tiny: fresh builds, two ranks and a killed-then-resumed build give one SHA256SUMS, and
deep verify re-encodes bit for bit (on the CPU here; the GPU run is in BENCHMARKS.md)."""

import importlib.util
import json

import pytest

from helpers import REPO

pytestmark = pytest.mark.slow  # a long end-to-end run; -m 'not slow' leaves it out


def test_every_run_gives_the_bytes_of_the_first(tmp_path, capfd):
    # the script's main() here, as tests/bench/test_bench_encode.py runs its bench; every build it compares is its
    # own `latentforge build` process either way
    spec = importlib.util.spec_from_file_location("bench_determinism", REPO / "bench" / "build" / "determinism.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "result.json"
    code = bench.main(["--tiny", "--out", str(out)])
    stdout, stderr = capfd.readouterr()
    assert code == 0, stdout[-3000:] + stderr[-3000:]
    result = json.loads(out.read_text())
    assert [row["run"] for row in result["runs"]] == ["fresh-1", "ranks-2", "killed+resumed"]
    assert all(row["exit"] == 0 and row["equals_fresh_1"] for row in result["runs"])
    assert "exit -9" in result["runs"][-1]["note"]  # the kill really happened before the resume
    assert result["deep_verify"]["ok"] and result["deep_verify"]["comparison"].startswith("exact")
    assert "same SHA256SUMS as fresh-1" in stdout
