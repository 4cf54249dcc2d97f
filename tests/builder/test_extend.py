"""`build --extend`: an extended cache holds, row for row, what a fresh build of the union holds; old rows keep
their dataset_index and bytes; removed ids are reported and kept; changed sources and configs are refused."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest

from helpers.builds import table_subset
from helpers.exec_world import exec_config, make_table
from latentforge.builder.run import build
from latentforge.cache.layout import SOURCE_INDEX_DATASET
from latentforge.errors import LatentforgeError, UnitFailed
from latentforge.sinks.hdf5.integrity import verify_integrity
from latentforge.testing import fault_points

# Row fields an extended cache numbers differently from a fresh build (docs/extend.md).
PLACE_FIELDS = ("dataset_index", "source_index", "shard_path", "cache_row", "unit", "batch")
BASE_IDS = ("clip000", "clip002", "clip004", "clip005")  # the union adds clip001, clip003 (between) and clip006


def _rows(root: Path) -> dict[str, tuple[dict, dict[str, np.ndarray]]]:
    """{sample_id: (manifest row, {dataset: row array})}."""
    out = {}
    for line in (root / "manifest.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        with h5py.File(root / row["shard_path"], "r") as shard:
            arrays = {name: shard[name][row["cache_row"]] for name in shard if name != SOURCE_INDEX_DATASET}
        out[row["sample_id"]] = (row, arrays)
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    folder = tmp_path_factory.mktemp("extend")
    union = make_table(folder / "data", count=7)
    return union, table_subset(union, "base.csv", BASE_IDS), folder


@pytest.fixture(scope="module")
def fresh_union(world):
    union, _, folder = world
    root = folder / "fresh"
    build(exec_config(union, root), quiet=True)
    return _rows(root)


def _base(world, tmp_path) -> Path:
    _, base, _ = world
    root = tmp_path / "cache"
    build(exec_config(base, root), quiet=True)
    return root


def _assert_same_rows(extended: dict, fresh: dict) -> None:
    assert sorted(extended) == sorted(fresh)
    for sample_id, (row, arrays) in extended.items():
        fresh_row, fresh_arrays = fresh[sample_id]
        assert {k: v for k, v in row.items() if k not in PLACE_FIELDS} == \
               {k: v for k, v in fresh_row.items() if k not in PLACE_FIELDS}, sample_id
        assert arrays.keys() == fresh_arrays.keys()
        for name in arrays:
            assert arrays[name].tobytes() == fresh_arrays[name].tobytes(), (sample_id, name)


def test_extend_adds_the_new_samples_and_keeps_the_old_rows(world, fresh_union, tmp_path):
    union, _, _ = world
    root = _base(world, tmp_path)
    before = _rows(root)
    result = build(exec_config(union, root), quiet=True, extend=True)
    assert result.added_ids == ["clip001", "clip003", "clip006"] and result.removed_ids == []
    after = _rows(root)
    for sample_id, (row, arrays) in before.items():  # old rows: same dataset_index, same bytes
        assert after[sample_id][0]["dataset_index"] == row["dataset_index"]
        assert all(after[sample_id][1][n].tobytes() == a.tobytes() for n, a in arrays.items())
    assert sorted(after[i][0]["dataset_index"] for i in result.added_ids) == [4, 5, 6]  # appended
    _assert_same_rows(after, fresh_union)
    assert verify_integrity(root).ok
    subprocess.run(["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=root, check=True)
    # a plain rerun would renumber the plan: refused, naming the fix
    with pytest.raises(LatentforgeError, match="was extended.*--extend"):
        build(exec_config(union, root), quiet=True)


def test_an_interrupted_extend_resumes_with_the_same_command(world, fresh_union, tmp_path, monkeypatch):
    union, _, _ = world
    root = _base(world, tmp_path)
    monkeypatch.setenv(fault_points.FAULT_ENV, "encode:3:raise")  # the first new unit is staged, the second is not
    monkeypatch.setattr(fault_points, "_arrivals", {})
    with pytest.raises(UnitFailed, match="unit 3 .*InjectedFault"):  # units 2-3 are the extension's
        build(exec_config(union, root), quiet=True, extend=True)
    monkeypatch.delenv(fault_points.FAULT_ENV)
    result = build(exec_config(union, root), quiet=True, extend=True)
    assert result.added_ids == [] and result.stats["samples_todo"] == 1
    _assert_same_rows(_rows(root), fresh_union)
    assert verify_integrity(root).ok


@pytest.mark.parametrize("fault", ["commit:1", "manifest:1", "sha256sums:1"])
def test_an_extend_stopped_in_its_commit_resumes_from_the_shards(world, fresh_union, tmp_path, monkeypatch, fault):
    """The base's staged units were retired by its commit, so the extend's commit copies their rows back from the
    shards; stopped after its first new shard (the old one still there), after its manifest (the old one removed,
    its rows only in the new shards) or after SHA256SUMS, the same command ends in the rows of a fresh build."""
    union, _, _ = world
    root = _base(world, tmp_path)
    assert not list((root / "build" / "staging").glob("*.h5"))  # retired: the rows are only in the shards
    monkeypatch.setenv(fault_points.FAULT_ENV, f"{fault}:raise")
    monkeypatch.setattr(fault_points, "_arrivals", {})
    with pytest.raises(fault_points.InjectedFault):
        build(exec_config(union, root), quiet=True, extend=True)
    monkeypatch.delenv(fault_points.FAULT_ENV)
    result = build(exec_config(union, root), quiet=True, extend=True)
    assert result.stats["samples_todo"] == 0  # nothing encoded again
    _assert_same_rows(_rows(root), fresh_union)
    assert verify_integrity(root).ok


def test_removed_ids_are_reported_and_their_rows_kept(world, tmp_path):
    union, _, _ = world
    root = _base(world, tmp_path)
    smaller = table_subset(union, "smaller.csv", ("clip000", "clip002", "clip005", "clip006"))
    result = build(exec_config(smaller, root), quiet=True, extend=True)
    assert result.removed_ids == ["clip004"] and result.added_ids == ["clip006"]
    assert sorted(_rows(root)) == ["clip000", "clip002", "clip004", "clip005", "clip006"]


def test_a_changed_source_is_refused_naming_it(world, tmp_path):
    union, base, _ = world
    root = _base(world, tmp_path)
    recaptioned = base.read_text(encoding="utf-8").replace("clip number 2", "a new caption")
    changed = base.with_name("recaptioned.csv")
    changed.write_text(recaptioned, encoding="utf-8")
    with pytest.raises(LatentforgeError, match=r"1 source\(s\) changed.*'clip002'.*--overwrite"):
        build(exec_config(changed, root), quiet=True, extend=True)


def test_a_changed_config_is_refused_naming_the_field(world, tmp_path):
    union, _, _ = world
    root = _base(world, tmp_path)
    with pytest.raises(LatentforgeError, match=r"config.output.storage_dtype: 'float16' -> 'float32'"):
        build(exec_config(union, root, "output.storage_dtype=float32"), quiet=True, extend=True)


def test_extend_needs_a_built_cache(world, tmp_path):
    union, _, _ = world
    with pytest.raises(LatentforgeError, match="Build it once without --extend"):
        build(exec_config(union, tmp_path / "empty"), quiet=True, extend=True)
