"""bench/io/text_storage.py --tiny: the same synthetic rows committed padded and trimmed; trimmed takes fewer bytes
per sample, and both caches are read back from a cold page cache."""

from __future__ import annotations

from helpers.bench_scripts import run_tiny


def test_text_storage_bench_runs_tiny(tmp_path):
    report = run_tiny("io/text_storage", tmp_path, "--work", str(tmp_path / "work"))
    padded, trimmed = report["runs"]["padded"], report["runs"]["trimmed"]
    assert trimmed["bytes_per_sample"] < padded["bytes_per_sample"]
    assert padded["cold_samples_per_s"] > 0 and trimmed["cold_samples_per_s"] > 0
