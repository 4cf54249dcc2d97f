"""What to try after `latentforge demo`: commands on the cache it built, written as the user's shell runs them."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

# Present in a source checkout (the editable install of the README), absent from an installed wheel.
TRAIN_EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "train_tiny.py"


def next_commands(root: Path) -> list[tuple[str, str]]:
    """(command, what it shows) for the cache at `root`, with `root` as the demo was given it."""
    cache = shlex.quote(str(root))
    commands = [
        (f"latentforge verify {cache}", "checksums, manifest, shards, finite values"),
        (f"latentforge inspect {cache}", "counts, shapes, tokenizer and text model"),
        (f"latentforge stats {cache}", "per-channel statistics, plots and an HTML report"),
        (f"latentforge preview {cache} --samples 2", "decoded samples next to their sources"),
    ]
    if TRAIN_EXAMPLE.is_file():
        script = shlex.quote(_as_typed(TRAIN_EXAMPLE))
        commands.append((f"python {script} --cache {cache}", "a tiny model trained on the cache, on the CPU"))
    return commands


def activation_hint() -> str | None:
    """`source .../activate` when this runs from a virtual environment that is not first on PATH (the README
    calls `.venv/bin/latentforge`), else None."""
    if sys.prefix == sys.base_prefix:
        return None
    bin_dir = Path(sys.executable).parent
    activate = bin_dir / "activate"
    on_path = shutil.which("latentforge")
    if not activate.is_file() or (on_path and Path(on_path).parent.absolute() == bin_dir.absolute()):
        return None
    return f"source {shlex.quote(_as_typed(activate))}"


def _as_typed(path: Path) -> str:
    """`path` relative to the working directory when it lies below it, else absolute."""
    relative = os.path.relpath(path)
    outside = relative == os.pardir or relative.startswith(os.pardir + os.sep)
    return str(path) if outside else relative
