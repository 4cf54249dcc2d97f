"""latentforge writes only where it may: a build, --overwrite, --extend, fetch, export and the demo refuse a folder
holding anything latentforge did not write, and the dataset's own folder, before a byte is written; the refused folder
is byte for byte what it was."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from helpers.builds import tiny_world, write_table
from latentforge.errors import CacheIntegrityError, ConfigError
from latentforge.export.run import export_cache
from latentforge.transfer import Destination, fetch, publish


def _snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    """(sha256 or "dir", mtime_ns) of everything under `folder`, by relative path."""
    found = {}
    for current, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(current, name)
            digest = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
            found[str(path.relative_to(folder))] = (digest, path.stat().st_mtime_ns)
    return found


def _users_folder(folder: Path) -> Path:
    """A working folder as a user has one: a README, a manifest of their own, a shards/ folder with a note."""
    (folder / "shards").mkdir(parents=True)
    (folder / "README.md").write_text("# my project\n")
    (folder / "manifest.jsonl").write_text('{"mine": true}\n')
    (folder / "shards" / "mine.txt").write_text("do not delete\n")
    (folder / "notes.txt").write_text("notes\n")
    return folder


def _build_args(table: Path, out: str, *more: str) -> list[str]:
    return ["build", "--dataset", str(table), "--set", "dataset.reader=table", "--tokenizer", "haar-4x8x8",
            "--text", "none", "--device", "cpu", "--set", "frames.num_frames=9", "--set", "frames.height=32",
            "--set", "frames.width=48", "--workers-per-gpu", "0", "--quiet", "--out", out, *more]


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> Path:
    world = tmp_path_factory.mktemp("ownership") / "world"
    return write_table(tiny_world(world, clips=3)[:2], world / "samples.csv")


@pytest.mark.parametrize("flags", [(), ("--overwrite",), ("--extend",)], ids=["build", "overwrite", "extend"])
def test_a_users_folder_is_refused_and_left_as_it_was(tmp_path, table, cli, flags):
    folder = _users_folder(tmp_path / "work")
    before = _snapshot(folder)
    done = cli(_build_args(table, ".", *flags), cwd=folder)
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"config error: output.root=. ({folder}) holds files latentforge did not write "
                           "(notes.txt, shards/mine.txt)")
    assert "nothing was written" in line and "another --out" in line
    assert _snapshot(folder) == before


def test_a_folder_holding_only_names_a_cache_uses_is_still_not_a_cache(tmp_path, table, cli):
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "README.md").write_text("# mine\n")
    before = _snapshot(folder)
    done = cli(_build_args(table, str(folder)))
    assert done.returncode == 2 and "is not empty and is not a latentforge cache" in done.stderr
    assert _snapshot(folder) == before


def test_the_dataset_folder_is_never_the_output(tmp_path, table, cli):
    world = tmp_path / "world"
    shutil.copytree(table.parent, world)
    before = _snapshot(world)
    for out in (world, world.parent):
        done = cli(_build_args(world / table.name, str(out), "--overwrite"))
        assert done.returncode == 2 and "holds the dataset" in done.stderr, done.stderr
    assert _snapshot(world) == before


def test_a_cache_with_a_users_file_added_is_refused_and_its_own_cache_rebuilds(tmp_path, table, cli):
    root = tmp_path / "cache"
    assert cli(_build_args(table, str(root))).returncode == 0
    assert cli(_build_args(table, str(root))).returncode == 0  # a rerun of its own cache
    assert cli(_build_args(table, str(root), "--overwrite")).returncode == 0
    (root / "shards" / "notes.txt").write_text("mine\n")
    before = _snapshot(root)
    done = cli(_build_args(table, str(root), "--overwrite"))
    assert done.returncode == 2 and "(shards/notes.txt)" in done.stderr
    assert _snapshot(root) == before


def test_fetch_refuses_a_file_and_a_users_folder_before_downloading(built_cache, tmp_path):
    published = tmp_path / "published"
    publish(built_cache, [Destination(f"file://{published}")])
    target = tmp_path / "afile"
    target.write_text("mine\n")
    with pytest.raises(ConfigError, match="is a file"):
        fetch(Destination(f"file://{published}"), target)
    users = _users_folder(tmp_path / "work")
    before = _snapshot(users)
    with pytest.raises(ConfigError, match="is not empty and is not a latentforge cache"):
        fetch(Destination(f"file://{published}"), users)
    assert _snapshot(users) == before and not (tmp_path / ".work.fetching").exists()
    other = tmp_path / "other"  # a cache, but not a copy of this one: refused before any download
    fetch(Destination(f"file://{published}"), other)
    (other / "shards" / "part-00099-of-00100-000000000-000000001.h5").write_bytes(b"another cache's shard")
    before = _snapshot(other)
    with pytest.raises(CacheIntegrityError, match="nothing was downloaded"):
        fetch(Destination(f"file://{published}"), other)
    assert _snapshot(other) == before and not (tmp_path / ".other.fetching").exists()


def test_fetch_to_a_file_url_fills_the_folder_it_names(built_cache, tmp_path, cli):
    published = tmp_path / "published"
    publish(built_cache, [Destination(f"file://{published}")])
    done = cli(["fetch", f"file://{published}", f"file://{tmp_path / 'copy'}"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "copy" / "_CACHE_COMPLETE").is_file() and not (tmp_path / "file:").exists()
    done = cli(["fetch", f"file://{published}", "s3://bucket/copy"], cwd=tmp_path)
    assert done.returncode == 2 and "must be a local folder" in done.stderr


def test_export_refuses_a_users_folder_a_file_and_the_cache_itself(built_cache, tmp_path):
    users = _users_folder(tmp_path / "work")
    before = _snapshot(users)
    with pytest.raises(ConfigError, match="nothing was written"):
        export_cache(built_cache, "pt-dicts", users)
    assert _snapshot(users) == before
    (tmp_path / "afile").write_text("mine\n")
    with pytest.raises(ConfigError, match="is a file"):
        export_cache(built_cache, "pt-dicts", tmp_path / "afile")
    cache_before = _snapshot(built_cache)
    with pytest.raises(ConfigError, match="inside the cache"):
        export_cache(built_cache, "pt-dicts", built_cache / "exported")
    assert _snapshot(built_cache) == cache_before


def test_the_demo_refuses_a_folder_of_other_files(tmp_path, cli):
    users = _users_folder(tmp_path / "work")
    before = _snapshot(users)
    done = cli(["demo", "--out", str(users)])
    assert done.returncode == 2 and "holds files the demo did not write" in done.stderr
    assert _snapshot(users) == before
