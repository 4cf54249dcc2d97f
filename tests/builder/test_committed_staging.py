"""After a verified commit the staged units' arrays are gone (the cache holds them; staging keeps a record of their
rows), so a build takes the disk of its cache, not twice it; a rerun with nothing new leaves every file as it was,
_SUCCESS included; a damaged record of a finished cache is mended from its shards, a damaged shard is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.exec_world import build_args, exec_config, make_table, sums
from latentforge.builder.run import build
from latentforge.cache.layout import PUBLISHED_MARKER
from latentforge.errors import CacheIntegrityError
from latentforge.sinks.hdf5.integrity import verify_integrity


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime_ns) of every file of the cache outside build/."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))
            if p.is_file() and "build" not in p.relative_to(root).parts}


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> Path:
    return make_table(tmp_path_factory.mktemp("committed-staging") / "data", count=6)


@pytest.fixture
def root(table, tmp_path) -> Path:
    root = tmp_path / "cache"
    build(exec_config(table, root), quiet=True)
    return root


def test_a_committed_build_keeps_no_second_copy_and_inspect_says_so(root, cli):
    staging = root / "build" / "staging"
    assert sorted(p.name for p in staging.iterdir()) == [f"unit-00000{u}.committed.json" for u in range(3)]
    shards = sum(p.stat().st_size for p in (root / "shards").iterdir())
    kept = sum(p.stat().st_size for p in staging.iterdir())
    assert kept < shards / 4, (kept, shards)
    done = cli(["inspect", str(root), "--json"])
    assert json.loads(done.stdout)["build_records"]["staged_units"] == 0
    assert "no staged unit arrays" in cli(["inspect", str(root)]).stdout


def test_a_rerun_with_nothing_new_touches_nothing(root, table, cli):
    (root / PUBLISHED_MARKER).write_text('{"published": "by a test"}\n')  # as `latentforge publish` leaves it
    before = _tree(root)
    done = cli(build_args(table, root, "--workers-per-gpu", "0"))
    assert done.returncode == 0, done.stderr
    assert "built" in done.stdout and "verified" in done.stdout
    assert _tree(root) == before


def test_a_damaged_manifest_is_mended_from_the_shards(root, table):
    reference = sums(root)
    manifest = root / "manifest.jsonl"
    manifest.write_text(manifest.read_text()[:100])
    build(exec_config(table, root), quiet=True)
    assert sums(root) == reference and verify_integrity(root).ok


def test_a_damaged_shard_is_never_committed_again(root, table):
    shard = sorted((root / "shards").iterdir())[0]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x01  # one flipped bit in the data
    shard.write_bytes(bytes(data))
    with pytest.raises(CacheIntegrityError, match="no shard holds them as their commit wrote it.*--overwrite"):
        build(exec_config(table, root), quiet=True)
    assert not verify_integrity(root).ok  # refused, never vouched for again
    build(exec_config(table, root), overwrite=True, quiet=True)  # the fix it names
    assert verify_integrity(root).ok

