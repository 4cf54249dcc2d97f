"""Deep verify reports progress per step and per sample through its callback; `verify --deep` shows the bars
on stderr and ends by naming the report it wrote."""

from __future__ import annotations

from collections import Counter

from helpers.progress import ProgressRecorder
from latentforge.cache.rows import manifest_rows
from latentforge.verification.deep import verify_deep


def test_every_step_advances_to_its_total(cache):
    recorder = ProgressRecorder()
    totals, done, progress = recorder.totals, recorder.done, recorder
    report = verify_deep(cache, indices=[2], progress=progress)
    assert report.ok, report.failures
    spot = manifest_rows(cache, lambda row: row.dataset_index == 2)
    batch = manifest_rows(cache, lambda row: row.batch_key == spot[0].batch_key)  # re-encoded with its batch
    hashed = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file() and p.parts[len(cache.parts)] != "build"
                 and p.name not in ("SHA256SUMS", "_CACHE_COMPLETE"))
    assert totals == {"sha256": hashed, "rows": len(manifest_rows(cache, lambda row: True)), "sources": len(batch),
                      "reencode": len(batch), "frame 0": 1, "quality": 1, "prompts": 1}
    assert done == Counter(totals)


def test_cli_deep_verify_shows_progress_and_names_the_report(cache, tmp_path, cli):
    written = tmp_path / "deep.json"
    done = cli(["verify", str(cache), "--deep", "--spot", "1", "--report", str(written)])
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "reencode" in done.stderr and "samples/s" in done.stderr
    assert written.is_file() and done.stdout.rstrip().endswith(f"wrote the report to {written}")
