"""On a machine with a GPU, the verbs that encode or decode take it without being told (as docs/verify.md says):
`verify --deep` of a CPU-built cache re-encodes on CUDA and says so, comparing within the tolerance since the
build ran elsewhere; `preview` decodes there and says so."""

from __future__ import annotations

import json


def test_deep_verify_takes_the_gpu_without_a_flag(cli, built_cache, tmp_path):
    report = tmp_path / "report.json"
    done = cli(["verify", str(built_cache), "--deep", "--spot", "1", "--report", str(report)])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "deep verify on cuda" in done.stdout
    written = json.loads(report.read_text())
    assert written["environment"]["device_type"] == "cuda" and written["comparison"].startswith("rel-L2 <=")


def test_preview_takes_the_gpu_without_a_flag(cli, built_cache, tmp_path):
    done = cli(["preview", str(built_cache), "--samples", "1", "--out", str(tmp_path)])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "decoding on cuda\n" in done.stdout and (tmp_path / "preview.png").is_file()
