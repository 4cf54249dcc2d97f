"""Every shell block of README.md and docs/*.md marked runnable runs, as written, against the demo's cache.

The marker is an HTML comment alone on the line right before a ```bash (or ```sh) fence:

    <!-- runnable -->
    ```bash
    latentforge inspect demo-cache/cache
    ```

Each marked block runs with `bash -e -o pipefail` in a folder that holds `demo-cache/` (built once per session by
`latentforge demo --out demo-cache`, as the README's demo command does) and `examples/` (a link to the
repository's), so paths read as they do from the repository root. This environment's bin folder comes first on
PATH, so `latentforge` and `python` are the ones under test; the block must exit 0. Mark only blocks that make
sense there: nothing that needs a GPU, real weights, object storage or Ray. The README's set-up commands carry
their own markers (`demo-command`, `test-command`) and are run by CI.

A block of plain `latentforge ...` / `python ...` lines (the README's: the commands the demo prints as the next
things to try) runs line by line through tests/conftest.py's demo_shell, in its order, stopping at the first
failure as `bash -e` would: each line is one command with no shell state or operators, so running it on its own
is running it in the block, and demo_shell runs each command once per session (tests/demo runs the same ones).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO
from helpers.next_commands import PROGRAMS

pytestmark = pytest.mark.slow  # builds the demo and runs every block; -m 'not slow' leaves it out

MARKER = "<!-- runnable -->"
SHELL_FENCE = re.compile(r"^```(bash|sh)\s*$")
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def runnable_blocks(path: Path) -> list[tuple[str, str]]:
    """(path:line of the fence, the block's text) for every marked block of `path`."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks = []
    for number, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        fence = number + 1
        if fence >= len(lines) or not SHELL_FENCE.match(lines[fence]):
            raise ValueError(f"{path.name}:{number + 1}: {MARKER} must be followed by a ```bash or ```sh fence")
        end = next(i for i in range(fence + 1, len(lines)) if lines[i].startswith("```"))
        blocks.append((f"{path.relative_to(REPO)}:{fence + 1}", "\n".join(lines[fence + 1:end]) + "\n"))
    return blocks


BLOCKS = [block for path in DOCS for block in runnable_blocks(path)]


@pytest.fixture(scope="session")
def demo_folder(demo_run) -> Path:
    """The session's `latentforge demo --out demo-cache` folder (tests/conftest.py), examples/ linked in."""
    return demo_run.cwd


def test_the_readme_has_runnable_blocks():
    assert any(where.startswith("README.md:") for where, _ in BLOCKS)


def _plain_commands(block: str) -> list[str] | None:
    """The block's lines when each is one plain command of the kind the demo prints (`latentforge ...` or
    `python ...`, no pipes, redirections, lists, substitutions or continuation lines); else None."""
    lines = [line for line in block.splitlines() if line.strip()]
    try:
        words = [shlex.split(line, comments=True) for line in lines]
    except ValueError:  # an open quote
        return None
    plain = all(w and w[0] in PROGRAMS and not any(set(word) & set("|&;<>()$`\\") for word in w) for w in words)
    return lines if lines and plain else None


@pytest.mark.parametrize("where, block", BLOCKS, ids=[where for where, _ in BLOCKS])
def test_runnable_block(demo_folder, demo_shell, demo_lock, where, block):
    commands = _plain_commands(block)
    if commands is not None:
        for command in commands:  # in order; the first failure ends the block, as under `bash -e`
            done = demo_shell(command)
            assert done.returncode == 0 and "Traceback" not in done.stderr, \
                f"{where}\n{block}\n{command}\n{done.stdout}\n{done.stderr}"
        return
    env = {**os.environ, "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    with demo_lock:  # the xdist workers share the demo's folder
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block], cwd=demo_folder, env=env,
                              capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr, f"{where}\n{block}\n{done.stdout}\n{done.stderr}"
