"""output.staging_url: staged units written to an fsspec URL, object first and sidecar last, and read back by
the committing process. A build staging at a file:// URL commits the bytes a build staging locally commits and then
deletes its units there; a unit object without its sidecar, of another size, or changed after its sidecar was
written counts as absent; a staging URL serves one build only."""

from __future__ import annotations

import shutil

import pytest

from helpers.builds import build_stopped_in_commit
from helpers.exec_world import build_args, exec_config, make_table, sums
from latentforge.cli.main import main
from latentforge.errors import DamagedFile, LatentforgeError
from latentforge.staging.remote_staging import RemoteStaging, staged_units
from latentforge.staging.staged_units import completed_units, sidecar_path

INLINE = ("--workers-per-gpu", "0")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """(folder, table): folder/local is the table's cache, folder/cut the same build stopped in its commit."""
    folder = tmp_path_factory.mktemp("remote-staging")
    table = make_table(folder / "data", count=5)
    assert main(build_args(table, str(folder / "local"), *INLINE)) == 0
    build_stopped_in_commit(exec_config(table, folder / "cut"))
    return folder, table


def test_a_build_staging_at_a_url_commits_what_a_locally_staged_build_commits(world, tmp_path):
    folder, table = world
    url = f"file://{tmp_path / 'stage'}"
    root = tmp_path / "cache"
    build_stopped_in_commit(exec_config(table, root, f"output.staging_url={url}"))
    staged = sorted(p.name for p in (tmp_path / "stage").iterdir())
    assert staged == ["staging.json"] + [f"unit-00000{u}.h5{s}" for u in range(3) for s in ("", ".done.json")]
    for unit in range(3):  # the units the commit reads are the ones staged at the URL, byte for byte
        name = f"unit-00000{unit}.h5"
        assert (tmp_path / "stage" / name).read_bytes() == (root / "build" / "staging" / name).read_bytes()
    assert main(build_args(table, str(root), *INLINE, "--set", f"output.staging_url={url}")) == 0
    assert sums(root) == sums(folder / "local")
    assert sorted(p.name for p in (tmp_path / "stage").iterdir()) == ["staging.json"]  # deleted once committed
    assert main(build_args(table, str(root), *INLINE, "--set", f"output.staging_url={url}")) == 0  # nothing to do
    assert sums(root) == sums(folder / "local")


def test_incomplete_or_changed_unit_objects_count_as_absent(world, tmp_path):
    folder, _ = world
    units = completed_units(folder / "cut" / "build")
    stage = tmp_path / "stage"
    remote = RemoteStaging(f"file://{stage}")
    remote.claim({"root": "r", "key_sha256": "k"}, overwrite=False)
    for path in units.values():
        remote.put(path)
    (stage / "unit-000000.h5.done.json").unlink()  # killed between the object and its sidecar
    cut = stage / "unit-000001.h5"
    cut.write_bytes(cut.read_bytes()[:-10])  # cut short after the sidecar was written
    changed = bytearray((stage / "unit-000002.h5").read_bytes())
    changed[100] ^= 0xFF  # same size, other bytes
    (stage / "unit-000002.h5").write_bytes(bytes(changed))
    assert staged_units(tmp_path / "build", f"file://{stage}", units) == {}
    assert not list((tmp_path / "build" / "staging").glob("*.h5"))  # nothing unverified is kept locally

    shutil.copy(units[2], stage / "unit-000002.h5")  # restored: it counts again, copied with its sidecar
    got = staged_units(tmp_path / "build", f"file://{stage}", units)
    assert list(got) == [2] and got[2].read_bytes() == units[2].read_bytes()
    assert sidecar_path(got[2]).read_bytes() == sidecar_path(units[2]).read_bytes()


def test_a_staging_url_serves_one_build(tmp_path):
    url = f"file://{tmp_path / 'stage'}"
    RemoteStaging(url).claim({"root": "/caches/a", "key_sha256": "1"}, overwrite=False)
    RemoteStaging(url).claim({"root": "/caches/a", "key_sha256": "1"}, overwrite=False)  # its own rerun
    with pytest.raises(LatentforgeError, match="units of the build of output.root '/caches/a'; give each build its"):
        RemoteStaging(url).claim({"root": "/caches/b", "key_sha256": "1"}, overwrite=False)
    with pytest.raises(LatentforgeError, match="staged with other settings; rerun with --overwrite"):
        RemoteStaging(url).claim({"root": "/caches/a", "key_sha256": "2"}, overwrite=False)
    (tmp_path / "stage" / "unit-000000.h5").write_bytes(b"x")
    RemoteStaging(url).claim({"root": "/caches/a", "key_sha256": "2"}, overwrite=True)
    assert sorted(p.name for p in (tmp_path / "stage").iterdir()) == ["staging.json"]


def test_a_damaged_claim_is_refused_naming_it(tmp_path):
    url = f"file://{tmp_path / 'stage'}"
    RemoteStaging(url).claim({"root": "/caches/a", "key_sha256": "1"}, overwrite=False)
    (tmp_path / "stage" / "staging.json").write_text('{"root": "/cach')
    with pytest.raises(DamagedFile, match=r"staging.json is damaged \(.*\); it says which build stages under this "
                                          "URL; rerun with --overwrite"):
        RemoteStaging(url).claim({"root": "/caches/a", "key_sha256": "1"}, overwrite=False)
    RemoteStaging(url).claim({"root": "/caches/a", "key_sha256": "1"}, overwrite=True)  # the fix it names


@pytest.mark.parametrize("value, message", [
    ("/shared/stage", "is not a URL; give an fsspec URL"),
    ("file://{root}/stage", "lies inside output.root"),
])
def test_a_staging_url_that_is_no_url_or_lies_in_the_cache_is_a_config_error(world, tmp_path, capfd, value,
                                                                           message):
    _, table = world
    root = tmp_path / "cache"
    code = main(build_args(table, str(root), *INLINE, "--set", f"output.staging_url={value.format(root=root)}"))
    assert code == 2 and message in capfd.readouterr().err
    assert not root.exists()
