"""A real tiny cache for the deep-verify, stats and preview tests: the demo world through the real build with
haar-4x8x8 and a tiny T5 (rgb, mask, depth; 9 frames of 32x48; 3 samples in batches of 2; one reject). And one
`latentforge demo` per test run (shared by the xdist workers) for tests/demo and tests/docs."""

from __future__ import annotations

import builtins
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
from filelock import FileLock

from helpers import REPO, cpu_width  # noqa: F401 (cpu_width: before torch loads)
from helpers.bucket_world import bucket_config, bucket_world
from helpers.builds import build_quietly, run_cli, tiny_config, tiny_t5, tiny_world, write_table
from helpers.exec_world import build_args, exec_config, make_table, run_main, sums
from latentforge.builder.run import build

_PRINT = builtins.print


def pytest_sessionstart(session: pytest.Session) -> None:
    """Byte-compile the package and the bench scripts' modules once, before any process imports them. Where
    PYTHONDONTWRITEBYTECODE is set (as on the machines this suite runs on) no import writes a .pyc, so every process
    the suite starts (ranks, decode workers, Ray workers, CLI and bench subprocesses) would compile latentforge
    again: about 0.3 s of CPU each. compileall writes them whatever that variable says; the workers skip it."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    import compileall

    for folder in (REPO / "src", REPO / "bench"):
        compileall.compile_dir(folder, quiet=1)


@pytest.fixture(autouse=True)
def _print_is_the_builtin():
    """A test (or fixture) that leaves builtins.print replaced breaks whatever runs after it on the same xdist
    worker and pickles or compares print (tests/text/test_pickles.py did, after the Ray tests: tqdm_ray swaps
    print when a Ray driver prints a worker's line). Fail where it happens, and put the builtin back."""
    if builtins.print is not _PRINT:
        found, builtins.print = builtins.print, _PRINT
        pytest.fail(f"builtins.print was {found!r} before this test: an earlier test or fixture teardown left it")
    yield
    if builtins.print is not _PRINT:
        found, builtins.print = builtins.print, _PRINT
        pytest.fail(f"this test left builtins.print replaced by {found!r}")


@pytest.fixture
def cli(capfd) -> Callable[..., subprocess.CompletedProcess]:
    """`latentforge ARGS` run in this process: cli(args, cwd=None, **env) -> CompletedProcess with the exit code
    and what reached stdout/stderr (helpers.exec_world.run_main). For tests of what a verb does and says; a test
    of the process itself (signals, kills, a fresh interpreter's imports or environment) runs a subprocess."""
    return lambda args, cwd=None, **env: run_main(args, capfd, cwd=cwd, **env)


@pytest.fixture(scope="session")
def tiny_inputs(tmp_path_factory) -> tuple[Path, Path]:
    """The demo world's table and a tiny T5 folder that built_cache is made from."""
    folder = tmp_path_factory.mktemp("deep")
    rows = tiny_world(folder / "world")
    table = write_table(rows, folder / "world" / "samples.csv")
    return table, tiny_t5(folder / "t5", rows, d_model=64)


@pytest.fixture(scope="session")
def built_cache(tiny_inputs, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("deep") / "cache"
    build_quietly(tiny_config(tiny_inputs[0], root, text_path=tiny_inputs[1]))
    return root


@pytest.fixture
def cache(built_cache, tmp_path) -> Path:
    """A private copy to tamper with (the build records under build/ keep pointing at the same world)."""
    root = tmp_path / "cache"
    shutil.copytree(built_cache, root)
    return root


@pytest.fixture(scope="session")
def bucket_inputs(tmp_path_factory) -> tuple[Path, Path]:
    """The quirky clips of helpers.bucket_world: (table, tiny T5 folder)."""
    return bucket_world(tmp_path_factory.mktemp("bucket-world"))


@pytest.fixture(scope="session")
def bucketed_cache(bucket_inputs, tmp_path_factory) -> Path:
    """The quirky clips built into one cache per bucket (helpers.bucket_world.BUCKETS)."""
    root = tmp_path_factory.mktemp("bucketed") / "cache"
    build_quietly(bucket_config(*bucket_inputs, root))
    return root


@dataclass(frozen=True)
class DemoRun:
    cwd: Path  # the folder `latentforge demo --out demo-cache` ran in; examples/ links to the repository's
    root: Path  # cwd/demo-cache/cache
    stdout: str


def _shared_folder(tmp_path_factory, name: str) -> Path:
    """A folder of this run that every xdist worker sees (the workers' base temp folders share a parent)."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory) -> DemoRun:
    """One `latentforge demo` per test run, whichever xdist worker asks first (the others wait on a lock and read
    its record), run as a user runs it: `latentforge demo --out demo-cache` in a fresh folder, through the CLI in a
    subprocess (the README's demo command). Tests read its cache, run what it printed (tests/demo) and the docs'
    runnable blocks (tests/docs, which need examples/ beside demo-cache/ as in the repository); none may change the
    cache's checksummed files (stats and preview write only under build/)."""
    cwd = _shared_folder(tmp_path_factory, "demo-run")
    record = cwd.with_name("demo-run.json")
    with FileLock(f"{cwd}.lock"):
        if not record.exists():
            shutil.rmtree(cwd, ignore_errors=True)  # a run that failed in another worker starts over here
            cwd.mkdir()
            done = run_cli("demo", "--out", "demo-cache", cwd=cwd)
            assert done.returncode == 0, done.stdout + done.stderr
            (cwd / "examples").symlink_to(REPO / "examples", target_is_directory=True)
            record.write_text(json.dumps({"stdout": done.stdout}), encoding="utf-8")
        stdout = json.loads(record.read_text(encoding="utf-8"))["stdout"]
    return DemoRun(cwd, cwd / "demo-cache" / "cache", stdout)


def _once_per_run(tmp_path_factory, name: str, make: Callable[[Path], dict]) -> dict:
    """make(folder)'s record, made once per test run in a folder every xdist worker sees, by whichever worker asks
    first (the others wait on a lock and read the record)."""
    folder = _shared_folder(tmp_path_factory, name)
    record = folder.with_name(f"{name}.json")
    with FileLock(f"{folder}.lock"):
        if not record.exists():
            shutil.rmtree(folder, ignore_errors=True)  # a make that failed in another worker starts over here
            folder.mkdir()
            record.write_text(json.dumps(make(folder)), encoding="utf-8")
        return json.loads(record.read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def ray_world(tmp_path_factory) -> tuple[Path, str]:
    """8 clips (helpers.exec_world.make_table) and the SHA256SUMS of their local build (exec_config, in a test
    process): what the Ray builds of tests/executor/test_ray_executor.py and test_ray_nodes.py must equal."""

    def make(folder: Path) -> dict:
        table = make_table(folder / "world", count=8)
        build(exec_config(table, folder / "local"), quiet=True)
        return {"table": str(table), "sums": sums(folder / "local")}

    record = _once_per_run(tmp_path_factory, "ray-world", make)
    return Path(record["table"]), record["sums"]


@pytest.fixture(scope="session")
def kill_world(tmp_path_factory) -> tuple[Path, str]:
    """24 clips and the SHA256SUMS of their build with one rank and no decode workers (the CLI's main() in a test
    process): what resumed builds (tests/builder/test_resume_kill.py) and builds with other ranks and decode
    workers (tests/executor/test_local_executor.py) must equal."""

    def make(folder: Path) -> dict:
        from latentforge.cli.main import main

        table = make_table(folder / "data", count=24)
        assert main(build_args(table, folder / "reference", "--procs", "1", "--workers-per-gpu", "0")) == 0
        return {"table": str(table), "sums": sums(folder / "reference")}

    record = _once_per_run(tmp_path_factory, "kill-world", make)
    return Path(record["table"]), record["sums"]


@pytest.fixture(scope="session")
def demo_lock(tmp_path_factory) -> FileLock:
    """Held while a command runs in the demo's folder: the workers share the folder, so one command at a time."""
    return FileLock(f"{_shared_folder(tmp_path_factory, 'demo-shell')}.lock")


@pytest.fixture(scope="session")
def demo_shell(demo_run, demo_lock, tmp_path_factory) -> Callable[[str], subprocess.CompletedProcess]:
    """Runs one command line with bash in the demo's folder (this environment's `latentforge` and `python` first
    on PATH) and returns its run, once per test run per command whichever worker asks (one at a time, under a
    lock; the others read the recorded run): the commands the demo prints and the README's block of the same
    commands (tests/demo, tests/docs) each run once, in the order first asked for. Two lines are the same command
    when their words are, a `python` script's path taken from the demo's folder (the demo prints
    examples/train_tiny.py by its absolute path, the README as examples/train_tiny.py beside demo-cache)."""
    env = {**os.environ, "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    runs = _shared_folder(tmp_path_factory, "demo-shell")

    def same_command(command: str) -> tuple[str, ...]:
        words = shlex.split(command, comments=True)
        if words[:1] == ["python"] and len(words) > 1:
            words[1] = str((demo_run.cwd / words[1]).resolve())
        return tuple(words)

    def run(command: str) -> subprocess.CompletedProcess:
        digest = hashlib.sha256(json.dumps(same_command(command)).encode("utf-8")).hexdigest()[:16]
        record = runs / f"{digest}.json"
        with demo_lock:
            if not record.exists():
                done = subprocess.run(["bash", "-c", command], cwd=demo_run.cwd, env=env, capture_output=True,
                                      text=True, timeout=300)
                runs.mkdir(exist_ok=True)
                record.write_text(json.dumps([done.returncode, done.stdout, done.stderr]), encoding="utf-8")
            code, stdout, stderr = json.loads(record.read_text(encoding="utf-8"))
        return subprocess.CompletedProcess(["bash", "-c", command], code, stdout, stderr)

    return run
