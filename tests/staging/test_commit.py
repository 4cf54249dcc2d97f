"""Staging and commit: what h5py, sha256sum and bash see in a committed cache, byte-stable re-commits."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest

from helpers.fake_rows import (
    LATENT_SHAPE,
    MAX_LENGTH,
    NUM_CANDIDATES,
    PLAN_REJECTS,
    TEXT_DIM,
    UNIT_REJECTS,
    build_cache,
    make_cache_config,
    make_samples,
    planned_units,
    sample_id,
    stage_units,
)
from helpers.integrity_commands import SEED_000_FILES, SEED_000_INTEGRITY  # noqa: E402
from latentforge.cache.checksums import checksummed_files, write_sha256sums
from latentforge.cache.config_file import CacheConfig
from latentforge.errors import CacheIntegrityError
from latentforge.records import Reject
from latentforge.sinks.hdf5 import commit as commit_module
from latentforge.sinks.hdf5.inspect import inspect_cache
from latentforge.sinks.hdf5.integrity import verify_integrity
from latentforge.staging.staged_unit_writer import write_staged_unit
from latentforge.staging.staged_units import completed_units, read_staged_unit, staged_unit_path

SEED_000 = SEED_000_FILES[0] if SEED_000_FILES else None


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    root = tmp_path_factory.mktemp("cache") / "root"
    return root, build_cache(root), make_samples()


def _manifest(root: Path) -> list[dict]:
    return [json.loads(line) for line in (root / "manifest.jsonl").read_text(encoding="utf-8").splitlines()]


def test_h5py_sees_the_contract_layout_and_the_staged_values(cache):
    root, result, data = cache
    accepted = data.accepted
    assert result.num_samples == len(accepted) == NUM_CANDIDATES - len(UNIT_REJECTS)
    assert [Path(p).name for p in result.shard_paths] == [
        "part-00000-of-00003-000000000-000000008.h5", "part-00001-of-00003-000000008-000000016.h5",
        "part-00002-of-00003-000000016-000000021.h5"]
    for rel, start in zip(result.shard_paths, (0, 8, 16)):
        with h5py.File(root / rel, "r") as shard:
            n = shard["source_index"].shape[0]
            want = {"perception_latent_state": ("float16", (n, *LATENT_SHAPE)),
                    "t5_text_embeddings": ("float16", (n, MAX_LENGTH, TEXT_DIM)),
                    "t5_text_length": ("uint16", (n,)), "source_index": ("int64", (n,))}
            assert sorted(shard.keys()) == sorted(want)
            for name, (dtype, shape) in want.items():
                ds = shard[name]
                assert (str(ds.dtype), ds.shape, ds.chunks) == (dtype, shape, (1, *shape[1:]))
                assert ds.compression is None and not ds.shuffle and not ds.fletcher32 and ds.scaleoffset is None
                assert not ds.id.get_create_plist().get_obj_track_times()  # a timestamp would break byte-identity
            sources = accepted[start:start + n]
            np.testing.assert_array_equal(shard["source_index"][()], sources)
            np.testing.assert_array_equal(shard["perception_latent_state"][()], [data.latents[i] for i in sources])
            np.testing.assert_array_equal(shard["t5_text_embeddings"][()], [data.embeddings[i] for i in sources])
            np.testing.assert_array_equal(shard["t5_text_length"][()], [data.lengths[i] for i in sources])
    with h5py.File(root / "empty_prompt.h5", "r") as empty:
        assert {k: (str(v.dtype), v.shape) for k, v in empty.items()} == {
            "t5_text_embeddings": ("float16", (1, MAX_LENGTH, TEXT_DIM)), "t5_text_length": ("uint16", (1,))}


def test_manifest_rejects_and_config_follow_the_contract(cache):
    root, result, data = cache
    rows = _manifest(root)
    assert [r["dataset_index"] for r in rows] == list(range(len(rows)))
    assert [r["source_index"] for r in rows] == data.accepted
    assert list(rows[0]) == ["dataset_index", "source_index", "sample_id", "shard_path", "cache_row", "prompt",
                             "prompt_truncated", "source_path", "unit", "batch", "provenance", "extra"]
    row = rows[8]  # source 3 is rejected: source_index 9, first row of shard 1; unit 1 keeps 6,7,8,9 -> batch 1
    assert (row["sample_id"], row["shard_path"], row["cache_row"], row["unit"], row["batch"]) == (
        sample_id(9), result.shard_paths[1], 0, 1, 1)
    assert "ünïcode" in (root / "manifest.jsonl").read_text(encoding="utf-8")  # UTF-8, not \\u escapes
    rejects = [json.loads(line) for line in (root / "rejects.jsonl").read_text().splitlines()]
    assert [r["sample_id"] for r in rejects] == sorted(r.sample_id for r in PLAN_REJECTS) + [
        sample_id(i) for i in sorted(UNIT_REJECTS)]
    config = json.loads((root / "cache_config.json").read_text())
    assert list(config)[:10] == ["format", "format_version", "latentforge_version", "preset", "num_samples",
                                 "num_planned", "num_rejected", "num_shards", "rows_per_shard", "storage_dtype"]
    assert (config["num_samples"], config["num_shards"], config["rows_per_shard"]) == (21, 3, 8)
    assert (root / "_CACHE_COMPLETE").is_file() and not (root / "_SUCCESS").exists()


def test_sha256sum_binary_accepts_sha256sums(cache):
    root, _, _ = cache
    listed = [line.split("  ", 1)[1] for line in (root / "SHA256SUMS").read_text().splitlines()]
    assert listed == sorted(listed) and "SHA256SUMS" not in listed and "_CACHE_COMPLETE" not in listed
    assert not any(p.startswith("build/") for p in listed) and "shards/" + Path(listed[-1]).name == listed[-1]
    done = subprocess.run(["sha256sum", "-c", "--strict", "SHA256SUMS"], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count(": OK") == len(listed) == 9


def _run_bash(script: str, cwd: Path, cache_root: str | None = None) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin"} | ({"CACHE_ROOT": cache_root} if cache_root else {})
    return subprocess.run(["bash", "-e", "-c", script], cwd=cwd, env=env, capture_output=True, text=True)


def test_seed_000_integrity_commands_pass_with_cache_complete(cache, tmp_path):
    root, result, _ = cache
    if SEED_000 is not None:  # the commands above are the seed's, character for character
        seed_text = SEED_000.read_text(encoding="utf-8")
        block = seed_text[seed_text.index("完整性检查"):]
        block = block[block.index("```bash") + 7:]
        assert " ".join(SEED_000_INTEGRITY) == block[:block.index("```")].strip()
    commands = [c.replace("-eq 28", f"-eq {result.num_shards}").replace("-eq 82869", f"-eq {result.num_samples}")
                for c in SEED_000_INTEGRITY]
    commands[0] = 'test -f "$CACHE_ROOT/_CACHE_COMPLETE" && test ! -e "$CACHE_ROOT/_SUCCESS"'
    done = _run_bash("\n".join(commands), tmp_path, str(root))
    assert done.returncode == 0, done.stderr
    wrong_count = commands[:-1] + [commands[-1].replace(f"-eq {result.num_samples}", f"-eq {result.num_samples + 1}")]
    assert _run_bash("\n".join(wrong_count), tmp_path, str(root)).returncode != 0


def test_readme_integrity_block_runs_in_bash(cache, tmp_path):
    root, _, _ = cache
    readme = (root / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", readme, re.S).group(1)
    assert "untrained tiny T5" in readme
    for cwd, cache_root in ((root, None), (tmp_path, str(root))):
        done = subprocess.run(["bash", "-c", block], cwd=cwd, capture_output=True, text=True,
                              env={"PATH": "/usr/bin:/bin"} | ({"CACHE_ROOT": cache_root} if cache_root else {}))
        assert done.returncode == 0 and "cache integrity OK: 3 shards, 21 samples" in done.stdout, done.stderr
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    (copy / "manifest.jsonl").write_text((copy / "manifest.jsonl").read_text() + "\n")
    assert subprocess.run(["bash", "-c", block], cwd=copy, capture_output=True).returncode != 0


def _checksummed_bytes(root: Path) -> dict[str, bytes]:
    return {rel: (root / rel).read_bytes() for rel in checksummed_files(root) + ["SHA256SUMS"]}


def test_recommit_is_byte_identical_whatever_the_unit_split_and_block_size(cache, tmp_path, monkeypatch):
    root, result, data = cache
    before = _checksummed_bytes(root)
    units = sorted(completed_units(root / "build").values())
    again = commit_module.commit_cache(root, units, PLAN_REJECTS, CacheConfig.load(root), *_empty_and_context(root),
                                       planned_units(6))
    assert again.report.ok and _checksummed_bytes(root) == before
    # Other units (4 samples each), one-row HDF5 writes: shards identical, manifest differs only in unit/batch.
    monkeypatch.setattr(commit_module, "_BLOCK_BYTES", 1)
    other = tmp_path / "other"
    build_cache(other, data, unit_size=4)
    after = _checksummed_bytes(other)
    assert {k: v for k, v in after.items() if k.startswith("shards/")} == {
        k: v for k, v in before.items() if k.startswith("shards/")}
    strip = lambda rows: [{k: v for k, v in r.items() if k not in ("unit", "batch")} for r in rows]  # noqa: E731
    assert strip(_manifest(other)) == strip(_manifest(root))


def _empty_and_context(root: Path):
    with h5py.File(root / "empty_prompt.h5", "r") as empty:
        arrays = (empty["t5_text_embeddings"][()], empty["t5_text_length"][()])
    return arrays, {"text_note": "text embeddings come from an untrained tiny T5 (tests)."}


def test_completed_units_count_only_files_matching_their_sidecar(tmp_path):
    build = tmp_path / "build"
    paths = sorted(stage_units(build, make_samples(), unit_size=6))
    assert sorted(completed_units(build)) == [0, 1, 2, 3]
    with open(paths[1], "r+b") as handle:  # cut short, as a crash mid-copy would leave it
        handle.truncate(paths[1].stat().st_size // 2)
    raw = bytearray(paths[2].read_bytes())  # same size, one byte altered
    raw[len(raw) // 2] ^= 0x01
    paths[2].write_bytes(bytes(raw))
    paths[3].with_name(paths[3].name + ".done.json").unlink()  # never finished its sidecar
    (paths[0].parent / ".unit-000004.h5.tmp123").write_bytes(paths[0].read_bytes())
    assert completed_units(build) == {0: paths[0]}


def test_staged_unit_round_trip_and_empty_unit(tmp_path):
    data = make_samples()
    stage_units(tmp_path, data, unit_size=6)
    unit = read_staged_unit(staged_unit_path(tmp_path, 1))
    kept = [i for i in range(6, 12) if i in data.latents]
    assert [r.source_index for r in unit.rows] == kept and [r.source_index for r in unit.rejects] == [10]
    np.testing.assert_array_equal(unit.latents, np.stack([data.latents[i] for i in kept]))
    np.testing.assert_array_equal(unit.text_lengths, [data.lengths[i] for i in kept])
    empty = write_staged_unit(tmp_path, 7, [], np.zeros((0, *LATENT_SHAPE), np.float16),
                              np.zeros((0, MAX_LENGTH, TEXT_DIM), np.float16), np.zeros(0, np.int64), [])
    staged = read_staged_unit(empty)
    assert staged.rows == [] and staged.latents.shape == (0, *LATENT_SHAPE) and 7 in completed_units(tmp_path)


def test_commit_refuses_a_sample_staged_twice_and_wrong_dtypes(tmp_path):
    data = make_samples()
    units = stage_units(tmp_path / "build", data, unit_size=6)
    twice = read_staged_unit(units[-1])  # unit 0, staged again under another unit number
    rows = [r.__class__(**{**r.__dict__, "unit": 9}) for r in twice.rows]
    extra = write_staged_unit(tmp_path / "build", 9, rows, twice.latents, twice.text_embeddings,
                              twice.text_lengths, [])
    with pytest.raises(CacheIntegrityError, match="staged more than once"):
        commit_module.commit_cache(tmp_path, units + [extra], [], make_cache_config(), None, {},
                                   {**planned_units(6), 9: [r.source_index for r in rows]})
    bad = write_staged_unit(tmp_path / "build", 9, rows, twice.latents.astype(np.float32), twice.text_embeddings,
                            twice.text_lengths, [])
    with pytest.raises(CacheIntegrityError, match="latents are float32"):
        commit_module.commit_cache(tmp_path, [bad], [], make_cache_config(), None, {},
                                   {9: [r.source_index for r in rows]})
    assert not (tmp_path / "_CACHE_COMPLETE").exists()


def test_cache_without_text_and_inspect(cache, tmp_path):
    result = build_cache(tmp_path / "notext", text=False)
    assert result.report.ok and not (tmp_path / "notext" / "empty_prompt.h5").exists()
    with h5py.File(tmp_path / "notext" / result.shard_paths[0], "r") as shard:
        assert sorted(shard.keys()) == ["perception_latent_state", "source_index"]
    root, result, _ = cache
    summary = inspect_cache(root).to_json()
    assert (summary["num_samples"], summary["num_shards"], summary["manifest_rows"]) == (21, 3, 21)
    assert [s["rows"] for s in summary["shards"]] == [8, 8, 5] and summary["complete"] and not summary["published"]
    assert summary["datasets"]["perception_latent_state"]["chunks"] == [1, *LATENT_SHAPE]
    assert summary["rejects"] == {"decode_error": 1, "duplicate_id": 1, "missing_caption": 1,
                                  "missing_source": 1, "too_short": 1}


# The commit accounts for the whole plan: nothing planned goes missing, nothing unplanned slips in.


def test_a_planned_unit_that_is_not_staged_fails_the_commit_naming_it(tmp_path):
    units = stage_units(tmp_path / "build", make_samples(), unit_size=6)  # units 3, 2, 1, 0
    with pytest.raises(CacheIntegrityError, match=r"1 of 4 planned units are not staged \(units 2\)"):
        commit_module.commit_cache(tmp_path, [u for u in units if "000002" not in u.name], PLAN_REJECTS,
                                   make_cache_config(), None, {}, planned_units(6))
    assert not (tmp_path / "_CACHE_COMPLETE").exists() and not (tmp_path / "manifest.jsonl").exists()


def test_a_unit_that_lost_a_sample_or_is_not_planned_fails_the_commit(tmp_path):
    units = stage_units(tmp_path / "build", make_samples(), unit_size=6)
    planned = planned_units(6)
    with pytest.raises(CacheIntegrityError, match=r"unit 1 accounts for source_index none beyond its plan and "
                                                  r"lacks 12"):
        commit_module.commit_cache(tmp_path, units, [], make_cache_config(), None, {},
                                   {**planned, 1: [*planned[1], 12]})
    with pytest.raises(CacheIntegrityError, match=r"staged units 3 are not in the plan"):
        commit_module.commit_cache(tmp_path, units, [], make_cache_config(), None, {},
                                   {u: planned[u] for u in (0, 1, 2)})


def test_a_commit_of_nothing_fails_whatever_the_rejects(tmp_path):
    rows_none = write_staged_unit(tmp_path / "build", 0, [], np.zeros((0, *LATENT_SHAPE), np.float16), None, None,
                                  [Reject("clips/a", 0, "too_short", "fake", "probe")])
    with pytest.raises(CacheIntegrityError, match="nothing to commit: the 1 planned samples of 1 units were all "
                                                  "rejected"):
        commit_module.commit_cache(tmp_path, [rows_none], [], make_cache_config(text=False), None, {}, {0: [0]})
    assert not (tmp_path / "_CACHE_COMPLETE").exists()


def test_the_cache_records_planned_kept_and_rejected_and_verify_checks_they_add_up(cache, tmp_path):
    root, result, _ = cache
    config = json.loads((root / "cache_config.json").read_text(encoding="utf-8"))
    assert (config["num_planned"], config["num_samples"], config["num_rejected"]) == (
        NUM_CANDIDATES + len(PLAN_REJECTS), NUM_CANDIDATES - len(UNIT_REJECTS), len(PLAN_REJECTS) + len(UNIT_REJECTS))
    assert "counts" in [c.name for c in verify_integrity(root).checks]
    copy = tmp_path / "cache"
    shutil.copytree(root, copy)
    text = (copy / "cache_config.json").read_text(encoding="utf-8")
    (copy / "cache_config.json").write_text(text.replace(f'"num_planned": {config["num_planned"]}',
                                                         f'"num_planned": {config["num_planned"] + 4}'))
    write_sha256sums(copy)  # the sums agree: only the counts say four planned samples went missing
    failures = [c for c in verify_integrity(copy).failures if c.name == "counts"]
    assert failures and "4 are unaccounted for" in failures[0].detail
    lines = (root / "rejects.jsonl").read_text(encoding="utf-8").splitlines()
    (copy / "cache_config.json").write_text(text)
    (copy / "rejects.jsonl").write_text("".join(line + "\n" for line in lines[:-1]), encoding="utf-8")
    write_sha256sums(copy)
    failures = [c for c in verify_integrity(copy).failures if c.name == "counts"]
    assert failures and f"counts {len(lines)} rejects, rejects.jsonl lists {len(lines) - 1}" in failures[0].detail


@pytest.mark.parametrize("colliding", [False, True])
def test_commit_refuses_a_sample_id_staged_twice(tmp_path, monkeypatch, colliding):
    """gather keeps a hash per sample_id and compares the rows whose hashes meet (every hash equal: still exact)."""
    from latentforge.staging import gather
    if colliding:
        monkeypatch.setattr(gather, "hash", lambda value: 7, raising=False)
    data = make_samples()
    units = stage_units(tmp_path / "build", data, unit_size=6)
    last = read_staged_unit(units[-1])
    first = read_staged_unit(units[0])
    renamed = last.rows[-1].__class__(**{**last.rows[-1].__dict__, "sample_id": first.rows[0].sample_id})
    write_staged_unit(tmp_path / "build", last.unit, [*last.rows[:-1], renamed], last.latents, last.text_embeddings,
                      last.text_lengths, last.rejects)
    with pytest.raises(CacheIntegrityError, match=re.escape(f"sample_id [{first.rows[0].sample_id!r}] staged more")):
        commit_module.commit_cache(tmp_path, units, PLAN_REJECTS, make_cache_config(), None, {}, planned_units(6))
    assert not (tmp_path / "manifest.jsonl").exists()
