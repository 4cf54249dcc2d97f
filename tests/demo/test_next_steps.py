"""The commands the demo suggests name its cache as the user gave it, quoted for the shell, and the tiny trainer
by the path that works from where the user stands."""

from __future__ import annotations

import shlex
from pathlib import Path

from helpers import REPO
from latentforge.demo.next_steps import next_commands


def test_commands_name_the_cache_and_the_verbs(monkeypatch):
    monkeypatch.chdir(REPO)
    commands = [command for command, _ in next_commands(Path("demo-cache/cache"))]
    assert commands == [
        "latentforge verify demo-cache/cache",
        "latentforge inspect demo-cache/cache",
        "latentforge stats demo-cache/cache",
        "latentforge preview demo-cache/cache --samples 2",
        "python examples/train_tiny.py --cache demo-cache/cache",
    ]


def test_a_path_with_spaces_is_quoted_and_the_example_is_absolute_from_elsewhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    commands = [shlex.split(command) for command, _ in next_commands(Path("my caches/demo cache"))]
    assert all("my caches/demo cache" in argv for argv in commands)
    assert commands[-1][1] == str(REPO / "examples" / "train_tiny.py")
