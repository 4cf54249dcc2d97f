"""A rerun works in proportion to what is new: probe results are reused while a sample's sources keep their size and
mtime (an `--extend` probes only the samples it adds), and a cache committed from the same plan whose files keep the
sizes and mtimes its commit recorded is left untouched, not read whole again; `--recheck` trusts neither record."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers.builds import table_subset
from helpers.exec_world import exec_config, make_table
from latentforge.builder.run import build
from latentforge.executor.base import Executor
from latentforge.sinks.hdf5 import integrity


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rerun")
    union = make_table(folder / "data", count=5)
    return union, table_subset(union, "base.csv", ("clip000", "clip001", "clip002"))


@pytest.fixture
def counted(monkeypatch):
    """The sample ids each probe and integrity verify of this test met, call by call."""
    calls: dict[str, list] = {"probe": [], "verify": []}
    probe, verify = Executor.run_probe, integrity.verify_integrity

    def counted_probe(self, samples, *args, **kwargs):
        calls["probe"].append(sorted(s.sample_id for s in samples))
        return probe(self, samples, *args, **kwargs)

    def counted_verify(*args, **kwargs):
        calls["verify"].append(args[0])
        return verify(*args, **kwargs)

    monkeypatch.setattr(Executor, "run_probe", counted_probe)
    monkeypatch.setattr(integrity, "verify_integrity", counted_verify)
    return calls


def _files(root: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime_ns) of every file of the cache outside its build records."""
    return {p.relative_to(root).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file() and "build" not in p.relative_to(root).parts}


def test_a_rerun_with_nothing_to_do_probes_nothing_and_leaves_the_cache_alone(world, tmp_path, counted):
    config = exec_config(world[1], tmp_path / "cache")
    build(config, quiet=True)
    assert counted["probe"] == [["clip000", "clip001", "clip002"]]
    before, counted["verify"][:] = _files(tmp_path / "cache"), []
    again = build(config, quiet=True)
    assert again.num_samples == 3 and counted["probe"][1:] in ([], [[]])
    assert counted["verify"] == [] and _files(tmp_path / "cache") == before  # not read, not rewritten


def test_a_changed_cache_file_is_read_whole_and_recheck_trusts_no_record(world, tmp_path, counted):
    config = exec_config(world[1], tmp_path / "cache")
    build(config, quiet=True)
    shard = sorted((tmp_path / "cache" / "shards").iterdir())[0]
    os.utime(shard, ns=(shard.stat().st_atime_ns, shard.stat().st_mtime_ns + 10**9))  # same bytes, other mtime
    counted["verify"][:] = []
    build(config, quiet=True)
    assert len(counted["verify"]) == 1  # its recorded stats differ: the integrity verify decides, and passes
    counted["probe"][:], counted["verify"][:] = [], []
    build(config, quiet=True, recheck=True)
    assert counted["probe"] == [["clip000", "clip001", "clip002"]] and len(counted["verify"]) == 1


def test_extend_probes_only_the_samples_it_adds(world, tmp_path, counted):
    union, base = world
    build(exec_config(base, tmp_path / "cache"), quiet=True)
    result = build(exec_config(union, tmp_path / "cache"), quiet=True, extend=True)
    assert result.num_samples == 5
    assert counted["probe"] == [["clip000", "clip001", "clip002"], ["clip003", "clip004"]]


def test_extend_writes_only_the_new_shards_and_the_old_ones_keep_their_bytes_and_mtimes(world, tmp_path, counted):
    union, base = world
    root = tmp_path / "cache"
    build(exec_config(base, root, "output.rows_per_shard=2"), quiet=True)
    old = [(p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes()) for p in sorted((root / "shards").iterdir())]
    assert len(old) == 2  # 2 + 1 rows
    build(exec_config(union, root, "output.rows_per_shard=2"), quiet=True, extend=True)
    new = sorted((root / "shards").iterdir())
    assert [p.name for p in new] == ["part-00000-of-00003-000000000-000000002.h5",
                                     "part-00001-of-00003-000000002-000000004.h5",
                                     "part-00002-of-00003-000000004-000000005.h5"]
    assert (new[0].stat().st_ino, new[0].stat().st_mtime_ns, new[0].read_bytes()) == old[0]  # the full shard, linked
    assert new[1].stat().st_ino != old[1][0]  # the partial one took new rows: written again
    assert integrity.verify_integrity(root).ok  # read whole, as a user's verify does
