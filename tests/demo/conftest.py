"""The commands `latentforge demo` prints as the next things to try, each run once per session on the demo's cache
(tests/conftest.py's demo_run, which tests/docs runs its blocks against too): from the folder the demo ran in, with
this environment's `latentforge` and `python` first on PATH. None may change the cache's checksummed files (stats
and preview write only under build/)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.next_commands import printed_commands


@pytest.fixture(scope="session")
def printed_runs(demo_run) -> dict[str, subprocess.CompletedProcess]:
    """{command: its run}, in the printed order (test_next_commands checks them all, test_train_tiny_on_demo what
    the training example printed)."""
    env = {**os.environ, "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    return {command: subprocess.run(["bash", "-c", command], cwd=demo_run.cwd, env=env, capture_output=True,
                                    text=True, timeout=300)
            for command in printed_commands(demo_run.stdout)}
