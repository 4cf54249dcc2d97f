"""bench/io/loader.py --tiny runs end to end (HDF5, and WebDataset tars locally and on a moto S3 server) and reports
every configuration it was asked for."""

from __future__ import annotations

import importlib.util
import json
import sys

from helpers import REPO

BENCH = REPO / "bench" / "io" / "loader.py"


def _load_bench():
    spec = importlib.util.spec_from_file_location("bench_loader", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file executes
    spec.loader.exec_module(module)
    return module


def test_tiny_bench_runs_and_reports(tmp_path, capsys):
    result = _load_bench().main(["--tiny", "--dir", str(tmp_path), "--json", str(tmp_path / "out.json")])
    rows = {(r["reader"], r["workers"], r["cache"]) for r in result["rows"]}
    expected = {(reader, w, state) for state in ("cold", "warm")
                for reader, w in (("raw sequential read", None), ("LatentCacheDataset", 0), ("LatentCacheDataset", 2))}
    expected |= {(f"{reader} ({where})", w, state) for where, state in (("local", "cold"), ("moto S3", "moto S3"))
                 for reader, w in (("raw object read", None), ("StreamingLatentDataset", 0),
                                   ("StreamingLatentDataset", 2))}
    assert rows == expected
    assert all(r["samples_per_s"] > 0 and r["mb_per_s"] > 0 for r in result["rows"])
    assert json.loads((tmp_path / "out.json").read_text())["samples"] == 16
    printed = capsys.readouterr().out
    assert "| LatentCacheDataset | 2 | cold |" in printed and "host cpu:" in printed and "eviction probe" in printed
