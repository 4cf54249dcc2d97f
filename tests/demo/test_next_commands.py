"""Every command `latentforge demo` prints as the next thing to try runs, as printed, on the cache it built:
from the folder the demo ran in, with this environment's `latentforge` and `python` first on PATH."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds the demo and trains for a few seconds; -m 'not slow' leaves it out

PROGRAMS = ("latentforge", "python")


def printed_commands(stdout: str) -> list[str]:
    """The indented `latentforge ...` / `python ...` lines after the demo's table, without their comments."""
    lines = [line.strip() for line in stdout.splitlines() if line.startswith("  ")]
    return [shlex.join(shlex.split(line, comments=True)) for line in lines if line.split(" ", 1)[0] in PROGRAMS]


def test_demo_prints_the_verbs_to_try(demo_run):
    verbs = [shlex.split(command)[:2] for command in printed_commands(demo_run.stdout)]
    assert [verb for program, verb in verbs if program == "latentforge"] == ["verify", "inspect", "stats", "preview"]
    assert any(program == "python" and verb.endswith("examples/train_tiny.py") for program, verb in verbs)
    assert all("demo-cache/cache" in command for command in printed_commands(demo_run.stdout))


def test_every_printed_command_runs(demo_run):
    env = {**os.environ, "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    for command in printed_commands(demo_run.stdout):
        done = subprocess.run(["bash", "-c", command], cwd=demo_run.cwd, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0 and "Traceback" not in done.stderr, f"{command}\n{done.stdout}{done.stderr}"
