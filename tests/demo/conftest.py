"""One `latentforge demo` per test session, run as a user runs it: `latentforge demo --out demo-cache` in a
fresh folder, through the CLI in a subprocess. Tests read its cache and what it printed; none may change the
cache's checksummed files (stats and preview write only under build/)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.builds import run_cli


@dataclass(frozen=True)
class DemoRun:
    cwd: Path  # the folder `latentforge demo --out demo-cache` ran in
    root: Path  # cwd/demo-cache/cache
    stdout: str


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory) -> DemoRun:
    cwd = tmp_path_factory.mktemp("demo-run")
    done = run_cli("demo", "--out", "demo-cache", cwd=cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    return DemoRun(cwd, cwd / "demo-cache" / "cache", done.stdout)
