"""Hostile ids in a table's id column: the CLI build succeeds, keeps every id verbatim in the manifest, and
writes nothing outside ROOT (issue 2, "Safety")."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from helpers.builds import read_manifest, tiny_extra, tiny_world, write_table
from latentforge.sinks.hdf5.integrity import verify_integrity

HOSTILE_IDS = [
    "/",
    "..",
    ".",
    "../../x",
    "../../../../../../escaped",
    "/tmp/absolute",
    "with spaces and\ttab",
    "line\nbreak",
    "ünïcødé/日本語/🎥",
    "é" * 200,  # 400 UTF-8 bytes: longer than any file name may be
    "x" * 300,
    "-rf --",
    "back\\slash",
]


def _snapshot(folder: Path, skip: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime_ns) of every file and folder under `folder`, except the `skip` subtree."""
    found = {}
    for current, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if Path(current, d) != skip]
        for name in dirs + files:
            stat = os.lstat(os.path.join(current, name))
            found[os.path.relpath(os.path.join(current, name), folder)] = (stat.st_size, stat.st_mtime_ns)
    return found


def test_hostile_ids_build_and_write_nothing_outside_root(tmp_path, cli):
    world = tmp_path / "world"
    clips = tiny_world(world, clips=3)[:2]
    rows = [{**clips[i % 2], "id": sample_id} for i, sample_id in enumerate(HOSTILE_IDS)]
    table = write_table(rows, world / "samples.jsonl")
    root = tmp_path / "deep" / "er" / "still" / "root"  # '..' chains from ROOT's sub-folders stay under tmp_path
    extra = tiny_extra(table, root)
    config_file = world / "build.yaml"
    config_file.write_text(yaml.safe_dump({"preset": "openvid-perception-stage1", **extra}), encoding="utf-8")
    before, siblings = _snapshot(tmp_path, root), sorted(os.listdir(tmp_path.parent))

    done = cli(["build", "--config", str(config_file), "--quiet"])

    assert done.returncode == 0, done.stdout + done.stderr
    after = _snapshot(tmp_path, root)
    root_folders = {os.path.relpath(p, tmp_path) for p in root.parents if tmp_path in p.parents}
    assert set(after) - set(before) == root_folders  # only the folders that lead to ROOT are new
    assert {name: after[name] for name in before} == before  # and nothing that was there changed
    assert sorted(os.listdir(tmp_path.parent)) == siblings
    assert not Path("/tmp/absolute").exists()
    assert verify_integrity(root).ok
    assert sorted(row["sample_id"] for row in read_manifest(root)) == sorted(HOSTILE_IDS)
    assert (root / "rejects.jsonl").read_text() == ""
    for path in root.rglob("*"):  # every name under ROOT is one the cache layout defines, not an id
        assert len(path.name.encode()) <= 255 and path.name.isascii() and " " not in path.name, path
