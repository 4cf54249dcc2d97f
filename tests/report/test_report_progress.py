"""`stats` and `preview` report progress per sample through their callback, and the verbs end by naming every
file they wrote."""

from __future__ import annotations

from collections import Counter

from helpers.progress import ProgressRecorder
from latentforge.report.preview import preview
from latentforge.report.statistics import compute_stats


def test_stats_advance_once_per_sample_read(built_cache):
    recorder = ProgressRecorder()
    totals, done, progress = recorder.totals, recorder.done, recorder
    computed = compute_stats(built_cache, progress=progress)
    assert totals == {"read": computed.num_samples} and done == Counter(totals)
    recorder = ProgressRecorder()
    totals, done, progress = recorder.totals, recorder.done, recorder
    compute_stats(built_cache, every=2, progress=progress)
    assert totals == {"read": (computed.num_samples + 1) // 2} and done == Counter(totals)


def test_preview_advances_once_per_sample_decoded(built_cache, tmp_path):
    recorder = ProgressRecorder()
    totals, done, progress = recorder.totals, recorder.done, recorder
    made = preview(built_cache, samples=2, out=tmp_path, progress=progress)
    assert totals == {"decode": len(made.dataset_indices)} == {"decode": 2} and done == Counter(totals)


def test_cli_stats_and_preview_name_the_files_they_wrote(built_cache, tmp_path, cli):
    done = cli(["stats", str(built_cache), "--out", str(tmp_path / "stats")])
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "samples/s" in done.stderr  # the progress bar
    written = sorted((tmp_path / "stats").iterdir())
    assert len(written) >= 5 and f"wrote {len(written)} files" in done.stdout
    assert all(str(path) in done.stdout for path in written)

    done = cli(["preview", str(built_cache), "--samples", "1", "--out", str(tmp_path / "preview")])
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "decode" in done.stderr
    for name in ("preview.mp4", "preview.png"):
        assert str(tmp_path / "preview" / name) in done.stdout
