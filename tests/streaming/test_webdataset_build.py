"""`latentforge build --set output.sink=webdataset --out s3://...` on the moto S3 server on loopback: the build
records stay in a node-local staging folder, a build killed mid-run and rerun as the same command leaves the
objects an uninterrupted build leaves, and `latentforge fetch` + `sha256sum -c` pass on them."""

from __future__ import annotations

import signal
import subprocess

import pytest

from helpers.exec_world import build_args, make_table, run_cli
from helpers.moto_s3 import moto_s3
from helpers.moto_s3 import objects as bucket_objects
from latentforge.builder.records_dir import STAGING_PARENT
from latentforge.cli.main import main
from latentforge.writers.staging import completed_units

BUCKET = "caches"


@pytest.fixture(scope="module")
def s3():
    with moto_s3(BUCKET) as server:
        yield server


def _objects(client, prefix: str) -> dict[str, bytes]:
    return bucket_objects(client, BUCKET, prefix)


def test_a_killed_webdataset_build_to_s3_reruns_to_the_uninterrupted_objects(s3, tmp_path, cli):
    client, env = s3
    table = make_table(tmp_path / "data", count=5)
    # 2 samples of 1536 B a tar; decoding on the encoder thread (decode workers are not what this tests)
    wds = ("--set", "output.sink=webdataset", "--set", "output.shard_bytes=4000", "--workers-per-gpu", "0")
    # in this process: the clean build and the fetch; the killed build and its rerun (staging under TMPDIR, which
    # tempfile reads once per process) in their own
    clean = cli(build_args(table, f"s3://{BUCKET}/clean", *wds, "--set",
                           f"output.staging_dir={tmp_path / 'clean-staging'}"), **env)
    assert clean.returncode == 0, clean.stderr
    reference = _objects(client, "clean")
    assert "_CACHE_COMPLETE" in reference and sum(k.startswith("shards/") for k in reference) == 3
    assert not [k for k in reference if k.startswith("build/")]  # the build records stayed node-local

    args = build_args(table, f"s3://{BUCKET}/killed", *wds)  # default staging: under TMPDIR, keyed by the URL
    killed = run_cli(args, TMPDIR=str(tmp_path), LATENTFORGE_FAULT="stage:2", **env)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert "_CACHE_COMPLETE" not in _objects(client, "killed")
    [staging] = (tmp_path / STAGING_PARENT).iterdir()
    assert completed_units(staging / "build"), "the staged units are not in the node-local staging folder"
    rerun = run_cli(args, TMPDIR=str(tmp_path), **env)
    assert rerun.returncode == 0, rerun.stderr
    assert _objects(client, "killed") == reference

    fetched = tmp_path / "fetched"
    done = cli(["fetch", f"s3://{BUCKET}/killed", str(fetched), "--allow-unpublished"], **env)
    assert done.returncode == 0, done.stderr
    assert subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=fetched).returncode == 0



@pytest.mark.slow
@pytest.mark.parametrize("fault", ["commit:2", "manifest:1", "sha256sums:1", "marker:1"])
def test_a_webdataset_commit_killed_in_each_phase_reruns_to_the_uninterrupted_objects(s3, tmp_path, fault, cli):
    client, env = s3
    table = make_table(tmp_path / "data", count=5)
    wds = ("--set", "output.sink=webdataset", "--set", "output.shard_bytes=4000", "--workers-per-gpu", "0")
    clean = cli(build_args(table, f"s3://{BUCKET}/clean-{fault}", *wds, "--set",
                           f"output.staging_dir={tmp_path / 'clean'}"), **env)
    assert clean.returncode == 0, clean.stderr
    args = build_args(table, f"s3://{BUCKET}/killed-{fault}", *wds, "--set", f"output.staging_dir={tmp_path / 'k'}")
    killed = run_cli(args, LATENTFORGE_FAULT=fault, **env)
    assert killed.returncode == -signal.SIGKILL, (fault, killed.stderr)
    left = _objects(client, f"killed-{fault}")
    assert left and "_CACHE_COMPLETE" not in left  # killed inside the commit, before its marker
    rerun = cli(args, **env)
    assert rerun.returncode == 0, rerun.stderr
    assert _objects(client, f"killed-{fault}") == _objects(client, f"clean-{fault}")


def test_staging_on_s3_killed_between_a_unit_and_its_sidecar_reruns_to_the_locally_staged_objects(s3, tmp_path,
                                                                                                 monkeypatch):
    """Ray workers with node-local disks stage at output.staging_url; here the build's own rank does, on the
    moto server. The kill leaves unit 1's object without its sidecar; the rerun counts it absent, encodes it
    again, and commits the objects a build staging on its local disk commits. Only the killed run needs its
    own process."""
    client, env = s3
    for name, value in {**env, "TMPDIR": str(tmp_path)}.items():
        monkeypatch.setenv(name, value)
    table = make_table(tmp_path / "data", count=3)  # units of 2 and 1 samples
    wds = ("--set", "output.sink=webdataset", "--set", "output.shard_bytes=4000", "--workers-per-gpu", "0")
    assert main(build_args(table, f"s3://{BUCKET}/local-staged", *wds, "--set",
                           f"output.staging_dir={tmp_path / 'records-local'}")) == 0
    args = build_args(table, f"s3://{BUCKET}/url-staged", *wds, "--set", f"output.staging_url=s3://{BUCKET}/stage",
                      "--set", f"output.staging_dir={tmp_path / 'records'}")
    killed = run_cli(args, LATENTFORGE_FAULT="upload:2", **env)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    staged = set(_objects(client, "stage"))
    assert {"unit-000000.h5", "unit-000000.h5.done.json", "unit-000001.h5"} <= staged
    assert "unit-000001.h5.done.json" not in staged
    assert main(args) == 0
    assert "unit-000001.h5.done.json" in _objects(client, "stage")
    assert _objects(client, "url-staged") == _objects(client, "local-staged")
