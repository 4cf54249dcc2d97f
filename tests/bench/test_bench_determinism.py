"""bench/determinism.py --tiny: fresh builds, two ranks and a killed-then-resumed build give one SHA256SUMS, and
deep verify re-encodes bit for bit (on the CPU here; the GPU run is in BENCHMARKS.md)."""

import json
import subprocess
import sys

import pytest

from helpers import REPO

pytestmark = pytest.mark.slow  # a long end-to-end run; -m 'not slow' leaves it out


def test_every_run_gives_the_bytes_of_the_first(tmp_path):
    out = tmp_path / "result.json"
    done = subprocess.run([sys.executable, str(REPO / "bench" / "determinism.py"), "--tiny", "--out", str(out)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert [row["run"] for row in result["runs"]] == ["fresh-1", "fresh-2", "ranks-2", "killed+resumed"]
    assert all(row["exit"] == 0 and row["equals_fresh_1"] for row in result["runs"])
    assert "exit -9" in result["runs"][-1]["note"]  # the kill really happened before the resume
    assert result["deep_verify"]["ok"] and result["deep_verify"]["comparison"].startswith("exact")
    assert "same SHA256SUMS as fresh-1" in done.stdout
