"""Disk full, permission denied and read-only output end the run with a clear message, then resume
to the uninterrupted result. Tests run as root, where chmod alone proves nothing: the failing build runs
as root without CAP_DAC_OVERRIDE/CAP_FOWNER (setpriv), on folders owned by `nobody` with mode 0755.
(Switching to `nobody` itself fails here: the interpreter lives under /root, mode 0700.) The failing builds run
in their own process (limits, capabilities, and an HDF5 failure ends a process with os._exit); the reference,
sizing and resuming builds run the CLI's main() in this process (tests/conftest.py's `cli`)."""

from __future__ import annotations

import os
import resource
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from helpers.builds import build_stopped_in_commit
from helpers.exec_world import build_args, cli_command, cli_env, exec_config, make_table, run_cli, sums
from helpers.processes import wait_for
from latentforge.cli.main import main
from latentforge.testing.fault_points import FAULT_ENV, RELEASE_ENV

pytestmark = pytest.mark.slow  # a long end-to-end run; -m 'not slow' leaves it out

NOBODY = 65534


@pytest.fixture(scope="module")
def world():
    # pytest's tmp_path is private to root; `nobody` must be able to read the inputs and the code.
    base = Path(tempfile.mkdtemp(prefix="lf-env-", dir="/tmp"))
    base.chmod(0o755)
    table = make_table(base / "data", count=8)
    for path in [base / "data", *(base / "data").rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IROTH | (stat.S_IXOTH if path.is_dir() else 0))
    reference = base / "reference"
    assert main(build_args(table, reference, "--workers-per-gpu", "0")) == 0
    build_stopped_in_commit(exec_config(table, base / "cut"))  # its staged units, as a build holds them
    yield base, table, reference
    shutil.rmtree(base)


WITHOUT_DAC = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner"]


def _run(args, preexec=None, prefix=()):
    return subprocess.run([*prefix, *cli_command(args)], env=cli_env(HOME="/tmp"), capture_output=True, text=True,
                          timeout=120, preexec_fn=preexec)


def test_disk_full_ends_cleanly_and_resumes(world, cli):
    base, table, reference = world
    staged = max(p.stat().st_size for p in (base / "cut" / "build" / "staging").glob("unit-*.h5"))
    run_records = max(p.stat().st_size for p in (reference / "build").iterdir() if p.is_file())
    shard = min(p.stat().st_size for p in (reference / "shards").iterdir())
    assert max(staged, run_records) < shard, (staged, run_records, shard)
    limit = (max(staged, run_records) + shard) // 2  # staging fits, the first shard does not

    def small_disk():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    root = base / "full"
    args = build_args(table, root, "--workers-per-gpu", "0")
    done = _run(args, small_disk)
    assert done.returncode == 1, done.stderr
    message = " ".join(done.stderr.split())  # rich wraps lines
    assert "file size limit reached" in message and "rerun the same command to resume" in message
    assert "Traceback" not in done.stderr
    assert not (root / "_CACHE_COMPLETE").exists()
    done = cli(args)
    assert done.returncode == 0, done.stderr
    assert sums(root) == sums(reference)


def _mount_tmpfs(folder: Path, size: int) -> None:
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"a real full disk needs a tmpfs mount, which this user may not do: {done.stderr.strip()}")


def test_full_file_system_at_commit_exits_1(world, cli, tmp_path):
    """ENOSPC from a real file system while the shards are written (h5py raises it as an OSError carrying
    the HDF5 driver's report): one line naming the file, exit 1, never the HDF5 library's crash at exit. The
    pre-flight sees room for the staged units and the shards, so the disk is filled by another writer while the
    commit is between its first and second shard."""
    base, table, _ = world
    big = ("--workers-per-gpu", "0", "--set", "output.storage_dtype=float32")
    sized = base / "sized"
    done = cli(build_args(table, sized, *big, width=768, height=512))
    assert done.returncode == 0, done.stderr
    cache = sum(p.stat().st_size for p in sized.rglob("*") if p.is_file())
    disk = base / "tmpfs"
    _mount_tmpfs(disk, 4 * cache)  # the pre-flight's estimate of staging and shards fits
    release = tmp_path / "release"
    try:
        root = disk / "cache"
        process = subprocess.Popen(cli_command(build_args(table, root, *big, width=768, height=512)),
                                   env=cli_env(**{FAULT_ENV: "commit:1:wait", RELEASE_ENV: str(release)}),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert wait_for(lambda: Path(f"{release}.waiting").exists() or process.poll() is not None, 120)
        assert process.poll() is None, process.communicate()
        with open(disk / "filler", "wb") as filler:  # another writer takes every free byte
            try:
                while True:
                    filler.write(b"\0" * (1 << 20))
                    filler.flush()
            except OSError:
                pass
        release.touch()
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 1, stderr
        message = " ".join(stderr.split())
        assert "disk full writing " in message and "rerun the same command to resume" in message, message
        assert "Traceback" not in stderr and "errno = 28" not in message
        assert not (root / "_CACHE_COMPLETE").exists()
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_the_preflight_counts_the_staged_units_and_the_shards(world, cli):
    """A disk that holds the staged units but not the shards as well is refused before anything is encoded."""
    base, table, _ = world
    big = ("--workers-per-gpu", "0", "--set", "output.storage_dtype=float32")
    sized = base / "sized-again"
    assert cli(build_args(table, sized, *big, width=768, height=512)).returncode == 0
    shards = sum(p.stat().st_size for p in (sized / "shards").iterdir())
    disk = base / "tmpfs-small"
    _mount_tmpfs(disk, shards * 3 // 2)  # one copy fits, two do not
    try:
        done = run_cli(build_args(table, disk / "cache", *big, width=768, height=512))
        assert done.returncode == 1, done.stderr
        message = " ".join(done.stderr.split())
        assert "not enough free disk" in message and "8 samples to stage and shards of 8 samples" in message
        assert not (disk / "cache" / "build" / "staging").exists() or \
            not list((disk / "cache" / "build" / "staging").iterdir())
    finally:
        subprocess.run(["umount", str(disk)], check=True)


@pytest.mark.parametrize("case", ["staging_not_writable", "read_only_root"])
def test_permission_denied_ends_cleanly_and_resumes(world, case, cli):
    base, table, reference = world
    root = base / case
    (root / "build" / "staging").mkdir(parents=True)
    (root / "build" / "lock").touch()  # as the build that made these folders left it: the root is latentforge's
    # staging_not_writable: the build may lock and plan, but not stage, so it fails inside a rank
    os.chown(root if case == "read_only_root" else root / "build" / "staging", NOBODY, NOBODY)
    args = build_args(table, root, "--procs", "2", "--workers-per-gpu", "0")
    done = _run(args, prefix=WITHOUT_DAC)
    assert done.returncode == 1, done.stderr
    message = " ".join(done.stderr.split())  # rich wraps lines
    assert "permission denied" in message and "rerun the same command to resume" in message
    assert "Traceback" not in done.stderr
    done = cli(args)
    assert done.returncode == 0, done.stderr
    assert sums(root) == sums(reference)
