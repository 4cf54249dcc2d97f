"""A damaged build record under ROOT/build (run.json, plan.jsonl, a staged unit, a kernel plan book) or a damaged
cache_config.json in the root: the rerun rebuilds what it can and then ends in the bytes of an uninterrupted build,
or refuses in one line that names the file and the fix, keeping everything already written. Damage to a finished
cache is mended by committing again from its shards; damage to the records of a build cut short in its commit
(staged units still there) is tried on such a build."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from helpers.bucket_world import bucket_config
from helpers.builds import build_stopped_in_commit
from helpers.exec_world import build_args, exec_config, make_table, sums
from latentforge.builder.run import build
from latentforge.errors import DamagedFileWarning


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(table, a cache built from it without interruption, the same build stopped by a fault after its first shard:
    every unit staged, no commit finished)."""
    folder = tmp_path_factory.mktemp("damaged-records")
    table = make_table(folder / "data", count=6)
    build(exec_config(table, folder / "pristine"), quiet=True)
    build_stopped_in_commit(exec_config(table, folder / "cut"))
    return table, folder / "pristine", folder / "cut"


@pytest.fixture
def root(world, tmp_path) -> Path:
    """A private copy of the built cache, build records included."""
    copy = tmp_path / "cache"
    shutil.copytree(world[1], copy)
    return copy


@pytest.fixture
def staged(world, tmp_path) -> Path:
    """A private copy of the build stopped in its commit, its units staged."""
    copy = tmp_path / "cache"
    shutil.copytree(world[2], copy)
    return copy


def _rebuild(cli, world, root: Path, *extra: str):
    return cli(build_args(world[0], root, "--workers-per-gpu", "0", *extra))


def _files(root: Path) -> dict[str, str]:
    """SHA-256 of every file under the root but the lock and the per-run stats (each run writes its own)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != "lock" and not p.name.startswith("stats-")}


def _one_error_line(done, *named: str) -> str:
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "unexpected" not in lines[0] and all(text in lines[0] for text in named), lines[0]
    return lines[0]


def _one_warning_line(done, *named: str) -> None:
    assert done.returncode == 0, done.stdout + done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and all(text in warnings[0] for text in named), done.stderr


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: max(1, path.stat().st_size // 2)])


# ------------------------------------------------------------------------------------------ run.json

def test_a_damaged_run_record_with_staged_units_is_refused_and_nothing_is_lost(cli, world, staged):
    _truncate(staged / "build" / "run.json")
    before = _files(staged)
    line = _one_error_line(_rebuild(cli, world, staged), str(staged / "build" / "run.json"), "3 staged unit(s)",
                           "--overwrite")
    assert "damaged" in line
    assert _files(staged) == before
    assert _rebuild(cli, world, staged, "--overwrite").returncode == 0  # the fix it names
    assert sums(staged) == sums(world[1])


def test_a_damaged_run_record_with_nothing_staged_is_rebuilt_from_the_config(cli, world, root):
    (root / "build" / "run.json").write_bytes(b"\x00\xff garbage")
    shutil.rmtree(root / "build" / "staging")
    done = _rebuild(cli, world, root)
    _one_warning_line(done, str(root / "build" / "run.json"), "rebuilt")
    assert sums(root) == sums(world[1])
    assert json.loads((root / "build" / "run.json").read_text())["inputs"]["count"] == 6


def test_a_run_record_that_parses_but_is_not_one_is_refused(cli, world, root):
    (root / "build" / "run.json").write_text('{"key": {"config": {}}}')
    _one_error_line(_rebuild(cli, world, root), "run.json is damaged (no inputs fingerprint)", "--overwrite")


def test_a_damaged_cache_config_is_written_again_while_run_json_holds_the_key(cli, world, root):
    _truncate(root / "cache_config.json")
    _one_warning_line(_rebuild(cli, world, root), str(root / "cache_config.json"), "writes it again")
    assert sums(root) == sums(world[1])


def test_a_damaged_cache_config_without_build_records_is_refused(cli, world, root):
    shutil.rmtree(root / "build")  # a fetched cache: nothing says which tokenizer made its shards
    _truncate(root / "cache_config.json")
    before = _files(root)
    _one_error_line(_rebuild(cli, world, root), str(root / "cache_config.json"), "fetch the cache again",
                    "--overwrite")
    assert _files(root) == before


# ---------------------------------------------------------------------------------------- plan.jsonl

def test_a_damaged_plan_is_made_again_from_the_input(cli, world, root):
    _truncate(root / "build" / "plan.jsonl")
    done = _rebuild(cli, world, root)
    assert done.returncode == 0, done.stderr
    assert sums(root) == sums(world[1])
    assert (root / "build" / "plan.jsonl").read_bytes() == (world[1] / "build" / "plan.jsonl").read_bytes()


# ------------------------------------------------------------------------------------------ staged units

def test_a_staged_unit_that_matches_its_sidecar_but_does_not_open_is_encoded_again(cli, world, staged):
    unit = staged / "build" / "staging" / "unit-000001.h5"
    unit.write_bytes(b"not an HDF5 file" * 64)
    digest = hashlib.sha256(unit.read_bytes()).hexdigest()
    (unit.parent / (unit.name + ".done.json")).write_text(json.dumps({"size": unit.stat().st_size,
                                                                      "sha256": digest}))
    _one_warning_line(_rebuild(cli, world, staged), str(unit), "encoded again")
    assert sums(staged) == sums(world[1])
    assert not unit.exists()  # encoded again, committed, and retired like every unit


# --------------------------------------------------------------------------------------- kernel plan books

def test_a_damaged_plan_book_with_staged_units_is_refused(cli, world, staged):
    book = staged / "build" / "conv_plans" / "0123456789abcdef.json"
    book.parent.mkdir()
    book.write_text('{"conv signature": "eng')
    before = _files(staged)
    _one_error_line(_rebuild(cli, world, staged), str(book), "kernel plans the staged units ran", "--overwrite")
    assert _files(staged) == before


def test_a_damaged_plan_book_with_nothing_staged_is_discarded(cli, world, staged):
    book = staged / "build" / "conv_plans" / "0123456789abcdef.json"
    book.parent.mkdir()
    book.write_text("[1, 2")
    shutil.rmtree(staged / "build" / "staging")
    _one_warning_line(_rebuild(cli, world, staged), str(book), "chosen again")
    assert not book.exists()
    assert sums(staged) == sums(world[1])


# ------------------------------------------------------------------------------------------- --extend

@pytest.fixture(scope="module")
def grown(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(the grown table, a cache built from its first four clips, that cache extended to the grown table)."""
    folder = tmp_path_factory.mktemp("damaged-extend")
    grown = make_table(folder / "data", count=6)
    lines = grown.read_text(encoding="utf-8").splitlines(keepends=True)
    first = grown.with_name("first.csv")
    first.write_text("".join(lines[:5]), encoding="utf-8")  # the header and clip000..clip003
    base = folder / "base"
    build(exec_config(first, base), quiet=True)
    extended = folder / "extended"
    shutil.copytree(base, extended)
    build(exec_config(grown, extended), quiet=True, extend=True)
    return grown, base, extended


def _extend(cli, table: Path, root: Path):
    return cli(build_args(table, root, "--workers-per-gpu", "0", "--extend"))


def _cut_in_a_line(path: Path) -> None:
    path.write_text('{"sample_id": "clip000", "source_')


def _cut_at_a_line(path: Path) -> None:
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:-1]))  # parses, one sample short


@pytest.mark.parametrize("damage", [_cut_in_a_line, _cut_at_a_line])
def test_a_damaged_plan_of_a_cache_never_extended_is_made_again_for_extend(cli, grown, tmp_path, damage):
    table, base, extended = grown
    root = tmp_path / "cache"
    shutil.copytree(base, root)
    damage(root / "build" / "plan.jsonl")
    _one_warning_line(_extend(cli, table, root), str(root / "build" / "plan.jsonl"), "made again from the input")
    assert sums(root) == sums(extended)


def test_a_damaged_plan_of_an_extended_cache_is_refused(cli, grown, tmp_path):
    table, _, extended = grown
    root = tmp_path / "cache"
    shutil.copytree(extended, root)
    _cut_at_a_line(root / "build" / "plan.jsonl")
    before = _files(root)
    _one_error_line(_extend(cli, table, root), str(root / "build" / "plan.jsonl"), "--overwrite")
    assert _files(root) == before


def test_a_damaged_run_record_is_refused_by_extend(cli, grown, tmp_path):
    table, base, _ = grown
    root = tmp_path / "cache"
    shutil.copytree(base, root)
    _truncate(root / "build" / "run.json")
    before = _files(root)
    _one_error_line(_extend(cli, table, root), str(root / "build" / "run.json"), "--overwrite")
    assert _files(root) == before


def test_a_damaged_model_record_is_made_again_by_loading_the_models(cli, world, staged):
    (staged / "build" / "models.json").write_text('{"tokenizer_fingerprint": {"na')
    _one_warning_line(_rebuild(cli, world, staged), str(staged / "build" / "models.json"), "loaded again")
    assert sums(staged) == sums(world[1])
    again = _rebuild(cli, world, staged)  # the commit wrote the record again
    assert again.returncode == 0 and "warning" not in again.stderr, again.stderr


# --------------------------------------------------------------------------------------- bucketed roots

def test_a_finished_bucket_with_a_damaged_config_is_committed_again(bucketed_cache, bucket_inputs, tmp_path):
    root = tmp_path / "cache"
    shutil.copytree(bucketed_cache, root)
    damaged = next((root / "buckets").glob("*/cache_config.json"))
    _truncate(damaged)
    with pytest.warns(DamagedFileWarning, match=f"{damaged} is damaged .*committed again"):
        build(bucket_config(*bucket_inputs, root), quiet=True)
    assert sums(root) == sums(bucketed_cache)
    assert damaged.read_bytes() == (bucketed_cache / damaged.relative_to(root)).read_bytes()
