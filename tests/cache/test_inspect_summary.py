"""`latentforge inspect ROOT` prints a summary a person reads: reject reasons as `reason count`, no Python
reprs."""

from __future__ import annotations


def test_summary_names_rejects_by_reason_without_reprs(built_cache, cli):
    done = cli(["inspect", str(built_cache)])
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    samples = next(line for line in done.stdout.splitlines() if line.lstrip().startswith("samples"))
    assert samples.endswith("rejected 1 (too_short 1)"), samples
    assert "{" not in done.stdout and "'" not in done.stdout
