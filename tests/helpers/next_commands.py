"""The commands `latentforge demo` prints as the next things to try, read from what it printed."""

from __future__ import annotations

import shlex

PROGRAMS = ("latentforge", "python")


def printed_commands(stdout: str) -> list[str]:
    """The indented `latentforge ...` / `python ...` lines after the demo's table, without their comments."""
    lines = [line.strip() for line in stdout.splitlines() if line.startswith("  ")]
    return [shlex.join(shlex.split(line, comments=True)) for line in lines if line.split(" ", 1)[0] in PROGRAMS]
