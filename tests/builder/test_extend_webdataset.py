"""`build --extend` of a WebDataset cache in a local folder, as of an HDF5 one: the new samples come after the old
ones, which keep their indices and member bytes; a full old tar stays the same file (name, inode, mtime); the cache
verifies and holds, row for row, what a fresh build of the union holds; an extend stopped anywhere reruns to the
objects of an uninterrupted one, and readers find a whole cache throughout. A damaged manifest is made again from
the tars' KEY.json members, by an extend as by a plain rerun; a changed tar is refused."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from helpers.builds import table_subset
from helpers.exec_world import build_args, exec_config, make_table
from helpers.swap_readers import commit_held_in_its_swap, file_identities
from latentforge import StreamingLatentDataset, verify
from latentforge.builder.run import build
from latentforge.cli.main import main
from latentforge.errors import CacheIntegrityError, DamagedFileWarning, LatentforgeError, UnitFailed
from latentforge.testing import fault_points

# Row fields an extended cache numbers differently from a fresh build (docs/extend.md).
PLACE_FIELDS = ("dataset_index", "source_index", "shard_path", "cache_row", "unit", "batch")
BASE_IDS = ("clip000", "clip002", "clip004", "clip005")  # the union adds clip001, clip003 (between) and clip006
SAMPLE_BYTES = 16 * 3 * 4 * 6 * 2  # haar-4x8x8's float16 latent of 9 frames of 32x48; no text
FULL_TAR = "shards/part-00000-of-00002-000000000-000000003.tar"  # the base's first tar: 3 samples, full
LAST_TAR = "shards/part-00001-of-00002-000000003-000000004.tar"  # its last: one sample, room for two more


def _config(table: Path, root: Path | str, records: Path):
    return exec_config(table, root, "output.sink=webdataset", f"output.shard_bytes={3 * SAMPLE_BYTES}",
                       f"output.staging_dir={records}")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The union's table, the base's table and a built base (root, records) that each test copies."""
    folder = tmp_path_factory.mktemp("extend-wds")
    union = make_table(folder / "data", count=7)
    base = table_subset(union, "base.csv", BASE_IDS)
    build(_config(base, folder / "base", folder / "base-records"), quiet=True)
    return union, folder


@pytest.fixture(scope="module")
def fresh_union(world):
    union, folder = world
    build(_config(union, folder / "fresh", folder / "fresh-records"), quiet=True)
    return _rows(folder / "fresh")


@pytest.fixture(scope="module")
def extended(world) -> dict[str, bytes]:
    """The objects of an uninterrupted extend of the base."""
    union, folder = world
    root, records = _copy_base(world, folder / "reference")
    build(_config(union, root, records), quiet=True, extend=True)
    return _objects(root)


def _copy_base(world, folder: Path) -> tuple[Path, Path]:
    """A copy of the built base (mtimes kept) and of its build records."""
    _, built = world
    shutil.copytree(built / "base", folder / "cache")
    shutil.copytree(built / "base-records", folder / "records")
    return folder / "cache", folder / "records"


def _objects(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "build" not in p.relative_to(root).parts}


def _rows(root: Path) -> dict[str, tuple[dict, dict[str, bytes]]]:
    """{sample_id: (KEY.json row, {member suffix: bytes})} of every sample in the root's tars."""
    out = {}
    for tar_path in sorted((root / "shards").glob("*.tar")):
        with tarfile.open(tar_path) as tar:
            members: dict[str, dict[str, bytes]] = {}
            for member in tar.getmembers():
                key, _, suffix = member.name.partition(".")
                members.setdefault(key, {})[suffix] = tar.extractfile(member).read()
        for data in members.values():
            row = json.loads(data.pop("json"))
            out[row["sample_id"]] = (row, data)
    return out


def _assert_same_rows(extended: dict, fresh: dict) -> None:
    assert sorted(extended) == sorted(fresh)
    for sample_id, (row, arrays) in extended.items():
        fresh_row, fresh_arrays = fresh[sample_id]
        assert {k: v for k, v in row.items() if k not in PLACE_FIELDS} == \
               {k: v for k, v in fresh_row.items() if k not in PLACE_FIELDS}, sample_id
        assert arrays == fresh_arrays, sample_id


def test_an_extend_adds_the_new_samples_and_keeps_the_old_tars_and_rows(world, fresh_union, extended, tmp_path):
    union, _ = world
    root, records = _copy_base(world, tmp_path)
    before, identities = _rows(root), file_identities(root)
    result = build(_config(union, root, records), quiet=True, extend=True)
    assert result.added_ids == ["clip001", "clip003", "clip006"] and result.removed_ids == []
    after = _rows(root)
    for sample_id, (row, members) in before.items():  # old rows: same indices, same member bytes
        assert (after[sample_id][0]["dataset_index"], after[sample_id][0]["source_index"]) == \
               (row["dataset_index"], row["source_index"])
        assert after[sample_id][1] == members
    assert sorted(after[i][0]["dataset_index"] for i in result.added_ids) == [4, 5, 6]  # appended
    _assert_same_rows(after, fresh_union)
    # the full old tar is the same file, name and all; the old last one gave way to tars of the new count
    assert file_identities(root)[FULL_TAR] == identities[FULL_TAR]
    assert sorted(p.name for p in (root / "shards").iterdir()) == [
        FULL_TAR.split("/")[1], "part-00001-of-00003-000000003-000000006.tar",
        "part-00002-of-00003-000000006-000000007.tar"]
    assert verify(str(root)).ok and main(["verify", str(root)]) == 0
    subprocess.run(["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=root, check=True)
    assert [item["sample_id"] for item in StreamingLatentDataset(str(root))] == \
           ["clip000", "clip002", "clip004", "clip005", "clip001", "clip003", "clip006"]
    assert _objects(root) == extended
    assert not (root / "build").exists()
    # an extend with nothing new commits nothing again; a plain rerun would renumber the plan: refused
    assert build(_config(union, root, records), quiet=True, extend=True).added_ids == []
    assert _objects(root) == extended and file_identities(root)[FULL_TAR] == identities[FULL_TAR]
    with pytest.raises(LatentforgeError, match="was extended.*--extend"):
        build(_config(union, root, records), quiet=True)


@pytest.mark.parametrize("fault", ["encode:3", "commit:1", "manifest:1", "sha256sums:1", "marker:1", "swap:2"])
def test_an_interrupted_extend_reruns_to_the_objects_of_an_uninterrupted_one(world, extended, tmp_path, monkeypatch,
                                                                            fault):
    """Stopped while encoding its second unit, between tars, after its manifest, after SHA256SUMS, before its
    marker (the old cache still whole at the root) or inside its swap (the new one whole in build/swap): the same
    command ends in the same objects. The base's staged units were retired: their rows come from its tars."""
    union, _ = world
    root, records = _copy_base(world, tmp_path)
    assert not list((records / "build" / "staging").glob("*.h5"))
    full_tar = file_identities(root)[FULL_TAR]
    monkeypatch.setenv(fault_points.FAULT_ENV, f"{fault}:raise")
    monkeypatch.setattr(fault_points, "_arrivals", {})
    with pytest.raises(UnitFailed if fault.startswith("encode") else fault_points.InjectedFault):
        build(_config(union, root, records), quiet=True, extend=True)
    assert verify(str(root)).ok  # a whole cache, the old one or the new one, read from build/swap mid-swap
    monkeypatch.delenv(fault_points.FAULT_ENV)
    result = build(_config(union, root, records), quiet=True, extend=True)
    assert result.stats["samples_todo"] == (1 if fault.startswith("encode") else 0)
    assert _objects(root) == extended and verify(str(root)).ok
    assert file_identities(root)[FULL_TAR] == full_tar


def test_removed_ids_are_reported_and_their_rows_kept(world, tmp_path):
    union, _ = world
    root, records = _copy_base(world, tmp_path)
    with open(union, newline="", encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(handle) if row["id"] in ("clip000", "clip002", "clip005", "clip006")]
    smaller = union.with_name("smaller.csv")  # beside the videos its rows name
    with open(smaller, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    result = build(_config(smaller, f"file://{root}", records), quiet=True, extend=True)  # a file:// URL: a folder
    assert result.removed_ids == ["clip004"] and result.added_ids == ["clip006"]
    assert sorted(_rows(root)) == ["clip000", "clip002", "clip004", "clip005", "clip006"]
    assert verify(str(root)).ok


def test_readers_find_a_whole_cache_throughout_the_extend(world, tmp_path, monkeypatch):
    union, _ = world
    root, records = _copy_base(world, tmp_path)
    reader = commit_held_in_its_swap(root, lambda: build(_config(union, root, records), quiet=True, extend=True),
                                     lambda folder: sum(1 for _ in StreamingLatentDataset(str(folder))), tmp_path,
                                     monkeypatch)
    assert reader.errors == []
    assert reader.samples == {4, 7}


def _flip_a_latent_bit(tar_path: Path) -> None:
    with tarfile.open(tar_path) as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for member, body in members:
            if member.name.endswith(".latent.npy"):
                body = body[:-2] + bytes([body[-2] ^ 0x01, body[-1]])
            tar.addfile(member, io.BytesIO(body))
    tar_path.write_bytes(out.getvalue())


def _damage_manifest(root: Path, damage: str) -> None:
    manifest = root / "manifest.jsonl"
    if damage == "truncated":
        manifest.write_text(manifest.read_text()[:100])
    elif damage == "edited":
        manifest.write_text(manifest.read_text().replace('"clip002"', '"clip00X"'))
    else:
        manifest.unlink()


def _sha256sum_checks(root: Path) -> None:
    subprocess.run(["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=root, check=True)


@pytest.mark.parametrize("damage", ["truncated", "edited", "missing"])
def test_a_damaged_manifest_is_made_again_from_the_tars_by_a_rerun(world, tmp_path, damage):
    """The base's staged units were retired, so its manifest rows are only in its tars' KEY.json members, as the
    commit wrote both: a plain rerun warns, names the file, and ends in the bytes the damage took."""
    union, _ = world
    root, records = _copy_base(world, tmp_path)
    before = _objects(root)
    _damage_manifest(root, damage)
    with pytest.warns(DamagedFileWarning, match=f"{root / 'manifest.jsonl'} is damaged .*KEY.json"):
        build(_config(union.with_name("base.csv"), root, records), quiet=True)
    assert _objects(root) == before and verify(str(root)).ok
    _sha256sum_checks(root)


def test_a_damaged_manifest_is_made_again_from_the_tars_by_an_extend(world, extended, tmp_path, cli):
    union, _ = world
    root, records = _copy_base(world, tmp_path)
    _damage_manifest(root, "truncated")
    done = cli(build_args(union, root, "--workers-per-gpu", "0", "--extend", "--set", "output.sink=webdataset",
                          "--set", f"output.shard_bytes={3 * SAMPLE_BYTES}", "--set", f"output.staging_dir={records}"))
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and str(root / "manifest.jsonl") in warnings[0] and "damaged" in warnings[0], warnings
    assert _objects(root) == extended and verify(str(root)).ok
    _sha256sum_checks(root)


@pytest.mark.parametrize("manifest", ["intact", "damaged"])
def test_a_changed_old_tar_is_never_committed_again(world, tmp_path, manifest):
    """The base's staged units were retired: the rows of its last tar, which the extend writes again, are only
    there. Changed after the commit, with its manifest intact or damaged too, the extend refuses, names the tar and
    the fix, and leaves the cache as it found it."""
    union, _ = world
    root, records = _copy_base(world, tmp_path)
    _flip_a_latent_bit(root / LAST_TAR)
    if manifest == "damaged":
        _damage_manifest(root, "truncated")
    left = _objects(root)
    with pytest.raises(CacheIntegrityError, match=f"{LAST_TAR} changed since its commit.*--overwrite"):
        build(_config(union, root, records), quiet=True, extend=True)
    assert _objects(root) == left and not verify(str(root)).ok  # never vouched for again
