"""bench/io/shot_detection.py --tiny runs end to end and reports seconds of video analysed per core-second, TransNetV2
(seeded random weights) without cuts."""

from __future__ import annotations

import pytest

from helpers.bench_scripts import load_bench

pytest.importorskip("scenedetect")


def test_tiny_bench_runs_and_reports(tmp_path, capsys):
    result = load_bench("io/shot_detection").main(["--tiny", "--out", str(tmp_path / "out.json")])
    assert [r["detector"] for r in result["rows"]] == ["none", "content", "adaptive", "transnetv2"]
    assert all(r["frames"] == 60 and r["realtime_per_core"] > 0 for r in result["rows"])
    assert result["rows"][1]["cuts"] == []  # one 2 s shot
    assert result["rows"][3]["cuts"] is None  # random weights: no accuracy to report
    assert (tmp_path / "out.json").exists()
    printed = capsys.readouterr().out
    assert "host cpu:" in printed and "| tiny 64x48 | content |" in printed
    assert "| tiny 64x48 | transnetv2 |" in printed and "| random weights |" in printed
