"""Every command `latentforge demo` prints as the next thing to try runs, as printed, on the cache it built:
from the folder the demo ran in, with this environment's `latentforge` and `python` first on PATH."""

from __future__ import annotations

import shlex

import pytest

from helpers.next_commands import printed_commands

pytestmark = pytest.mark.slow  # builds the demo and trains for a few seconds; -m 'not slow' leaves it out


def test_demo_prints_the_verbs_to_try(demo_run):
    verbs = [shlex.split(command)[:2] for command in printed_commands(demo_run.stdout)]
    assert [verb for program, verb in verbs if program == "latentforge"] == ["verify", "inspect", "stats", "preview"]
    assert any(program == "python" and verb.endswith("examples/train_tiny.py") for program, verb in verbs)
    assert all("demo-cache/cache" in command for command in printed_commands(demo_run.stdout))


def test_every_printed_command_runs(demo_run, printed_runs):
    assert list(printed_runs) == printed_commands(demo_run.stdout) != []
    for command, done in printed_runs.items():
        assert done.returncode == 0 and "Traceback" not in done.stderr, f"{command}\n{done.stdout}{done.stderr}"
