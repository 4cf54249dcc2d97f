"""bench/io/probe.py --tiny runs end to end and reports the probe against a demux-only pass of the same clip."""

from __future__ import annotations

from helpers.bench_scripts import load_bench


def test_tiny_bench_runs_and_reports(tmp_path, capsys):
    result = load_bench("io/probe").main(["--tiny", "--out", str(tmp_path / "out.json")])
    (row,) = result["rows"]
    assert row["packets"] == row["frames"] == 24
    assert row["probe_cpu_s"] > 0 and row["demux_cpu_s"] >= 0
    assert (tmp_path / "out.json").exists()
    printed = capsys.readouterr().out
    assert "host cpu:" in printed and "| tiny.mp4 | 24 | 24 |" in printed
