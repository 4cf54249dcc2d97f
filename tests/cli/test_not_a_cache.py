"""A root that is no cache at all (a typo, an ordinary folder, a build that never committed) gets one line naming
the path and what it is not, and exit 1 (docs/cli.md: the cache is missing), from every verb that reads a cache;
a cache that exists but never finished its commit keeps verify's full report."""

from __future__ import annotations

import pytest

from helpers.fake_cache import write_fake_cache
from latentforge import verify
from latentforge.errors import NotACache

READERS = [["verify"], ["verify", "--deep"], ["inspect"], ["stats"], ["preview"], ["query", "ROOT", "true"],
           ["export", "ROOT", "--to", "pt-dicts", "OUT"]]


def _args(verb: list[str], root, out) -> list[str]:
    """The verb's command line with ROOT (appended when the verb names no other place for it) and OUT filled in."""
    args = [str(root) if a == "ROOT" else str(out) if a == "OUT" else a for a in verb]
    return args if "ROOT" in verb else [*args, str(root)]


def _one_line(done) -> str:
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr and done.stdout == "", done.stdout
    return lines[0]


@pytest.mark.parametrize("verb", READERS, ids=lambda v: " ".join(v))
def test_a_missing_path_is_one_line_and_nothing_is_created(cli, verb, tmp_path):
    missing = tmp_path / "no" / "such"
    line = _one_line(cli(_args(verb, missing, tmp_path / "out")))
    assert line == (f"error: {missing} does not exist; give the root of a latentforge cache (the folder holding "
                    "cache_config.json, the --out of its build)")
    assert not (tmp_path / "no").exists()  # verify --deep wrote its report under the missing root


def test_a_folder_without_cache_config_is_not_a_cache(cli, tmp_path):
    (tmp_path / "videos").mkdir()
    (tmp_path / "videos" / "clip.mp4").write_bytes(b"")
    line = _one_line(cli(["verify", str(tmp_path / "videos")]))
    assert line == (f"error: {tmp_path / 'videos'} is not a latentforge cache: it has no cache_config.json; give the "
                    "folder holding it (the --out of its build)")
    (tmp_path / "notes.txt").write_text("x")
    assert "is a file, not a latentforge cache" in _one_line(cli(["inspect", str(tmp_path / "notes.txt")]))


def test_a_build_that_never_committed_says_to_rerun_it(cli, tmp_path):
    (tmp_path / "cache" / "build" / "staging").mkdir(parents=True)
    line = _one_line(cli(["verify", str(tmp_path / "cache")]))
    assert "is not a latentforge cache yet: it holds an unfinished build (build/) but no" in line
    assert line.endswith("rerun the build command to finish it")


def test_the_library_raises_the_same_line(tmp_path):
    with pytest.raises(NotACache, match="does not exist"):
        verify(tmp_path / "missing")


def test_a_cache_without_its_completion_marker_keeps_the_full_report(cli, tmp_path):
    root = write_fake_cache(tmp_path / "cache", num_samples=2, rows_per_shard=2)
    (root / "_CACHE_COMPLETE").unlink()
    failures = {check.name: check.detail for check in verify(root).failures}
    assert failures == {"markers": "_CACHE_COMPLETE is missing: the build did not finish its commit"}
    done = cli(["verify", str(root)])
    assert done.returncode == 1 and "error:" not in done.stderr, done.stderr
    table = " ".join(done.stdout.split())
    assert "│ markers │ FAIL │ _CACHE_COMPLETE is missing" in table and "│ cache_config │ ok │" in table, table
    assert "cache FAILED verification" in table
    assert cli(["verify", "--allow-incomplete", str(root)]).returncode == 0
