"""What to try after `latentforge demo`: commands on the cache it built, written as the user's shell runs them."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

# Present in a source checkout (the editable install of the README), absent from an installed wheel.
TRAIN_EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "train_tiny.py"
TOKENS_EXAMPLE = TRAIN_EXAMPLE.with_name("train_tokens.py")  # for a discrete-token cache


def next_commands(root: Path, tokens: bool = False) -> list[tuple[str, str]]:
    """(command, what it shows) for the cache at `root`, with `root` as the demo was given it; `tokens`: the cache
    holds token ids."""
    cache = shlex.quote(str(root))
    checked, measured = ("token ids", "token") if tokens else ("finite values", "per-channel")
    commands = [
        (f"latentforge verify {cache}", f"checksums, manifest, shards, {checked}"),
        (f"latentforge inspect {cache}", "counts, shapes, tokenizer and text model"),
        (f"latentforge stats {cache}", f"{measured} statistics, plots and an HTML report"),
        (f"latentforge preview {cache} --samples 2", "decoded samples next to their sources"),
    ]
    example = TOKENS_EXAMPLE if tokens else TRAIN_EXAMPLE
    if example.is_file():
        script = shlex.quote(_as_typed(example))
        what = "a tiny next-token model" if tokens else "a tiny model"
        commands.append((f"python {script} --cache {cache}", f"{what} trained on the cache, on the CPU"))
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
