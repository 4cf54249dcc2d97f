"""`latentforge build --set output.sink=webdataset --out s3://...` on the moto S3 server on loopback: the build
records stay in a node-local staging folder, a build killed mid-run and rerun as the same command leaves the
objects an uninterrupted build leaves, and `latentforge fetch` + `sha256sum -c` pass on them."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from helpers.exec_world import build_args, make_table, run_cli
from helpers.moto_s3 import moto_s3
from helpers.moto_s3 import objects as bucket_objects
from latentforge.builder.records_dir import STAGING_PARENT
from latentforge.cli.main import main
from latentforge.staging.staged_units import completed_units

BUCKET = "caches"


# 2 samples of 1536 B a tar; decoding on the encoder thread (decode workers are not what this tests)
WDS = ("--set", "output.sink=webdataset", "--set", "output.shard_bytes=4000", "--workers-per-gpu", "0")


@pytest.fixture(scope="module")
def s3():
    with moto_s3(BUCKET) as server:
        yield server


@pytest.fixture(scope="module")
def clean(s3, tmp_path_factory) -> tuple[Path, dict[str, bytes]]:
    """Five clips and the objects their uninterrupted build leaves, which every killed build of them must end in
    (the objects do not depend on the build's URL or its staging folder). Built in this process."""
    client, env = s3
    folder = tmp_path_factory.mktemp("wds-clean")
    table = make_table(folder / "data", count=5)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        assert main(build_args(table, f"s3://{BUCKET}/clean", *WDS, "--set",
                               f"output.staging_dir={folder / 'clean-staging'}")) == 0
    return table, _objects(client, "clean")


def _objects(client, prefix: str) -> dict[str, bytes]:
    return bucket_objects(client, BUCKET, prefix)


def test_a_killed_webdataset_build_to_s3_reruns_to_the_uninterrupted_objects(s3, clean, tmp_path, cli):
    client, env = s3
    table, reference = clean
    # in this process: the fetch; the killed build and its rerun (staging under TMPDIR, which tempfile reads once
    # per process) in their own
    assert "_CACHE_COMPLETE" in reference and sum(k.startswith("shards/") for k in reference) == 3
    assert not [k for k in reference if k.startswith("build/")]  # the build records stayed node-local

    args = build_args(table, f"s3://{BUCKET}/killed", *WDS)  # default staging: under TMPDIR, keyed by the URL
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
def test_a_webdataset_commit_killed_in_each_phase_reruns_to_the_uninterrupted_objects(s3, clean, tmp_path, fault,
                                                                                      cli):
    client, env = s3
    table, reference = clean
    args = build_args(table, f"s3://{BUCKET}/killed-{fault}", *WDS, "--set", f"output.staging_dir={tmp_path / 'k'}")
    killed = run_cli(args, LATENTFORGE_FAULT=fault, **env)
    assert killed.returncode == -signal.SIGKILL, (fault, killed.stderr)
    left = _objects(client, f"killed-{fault}")
    assert left and "_CACHE_COMPLETE" not in left  # killed inside the commit, before its marker
    rerun = cli(args, **env)
    assert rerun.returncode == 0, rerun.stderr
    assert _objects(client, f"killed-{fault}") == reference


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
    assert main(build_args(table, f"s3://{BUCKET}/local-staged", *WDS, "--set",
                           f"output.staging_dir={tmp_path / 'records-local'}")) == 0
    args = build_args(table, f"s3://{BUCKET}/url-staged", *WDS, "--set", f"output.staging_url=s3://{BUCKET}/stage",
                      "--set", f"output.staging_dir={tmp_path / 'records'}")
    killed = run_cli(args, LATENTFORGE_FAULT="upload:2", **env)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    staged = set(_objects(client, "stage"))
    assert {"unit-000000.h5", "unit-000000.h5.done.json", "unit-000001.h5"} <= staged
    assert "unit-000001.h5.done.json" not in staged
    assert main(args) == 0
    assert set(_objects(client, "stage")) == {"staging.json"}  # the units, committed, are deleted there
    assert _objects(client, "url-staged") == _objects(client, "local-staged")
