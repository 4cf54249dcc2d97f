"""The commands `latentforge demo` prints as the next things to try, each run once per session on the demo's cache
(tests/conftest.py's demo_run, which tests/docs runs its blocks against too): from the folder the demo ran in, with
this environment's `latentforge` and `python` first on PATH. None may change the cache's checksummed files (stats
and preview write only under build/)."""

from __future__ import annotations

import subprocess

import pytest

from helpers.next_commands import printed_commands


@pytest.fixture(scope="session")
def printed_runs(demo_run, demo_shell) -> dict[str, subprocess.CompletedProcess]:
    """{command: its run}, in the printed order (test_next_commands checks them all, test_train_tiny_on_demo what
    the training example printed). Each runs with bash through tests/conftest.py's demo_shell, which runs a
    command line once per session: the README's block of the same commands (tests/docs) reuses these runs."""
    return {command: demo_shell(command) for command in printed_commands(demo_run.stdout)}
