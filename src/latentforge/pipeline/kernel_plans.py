"""The kernel plans a build ran: ROOT/build/conv_plans/<environment digest>.json, one book per environment.

The build's plan pass (plan_pass.py) decides the book of its environment (device model and software,
pipeline/environment.py) before any rank starts, starting from the book already here (a resumed build), and the
process that runs the build writes it here; ranks and Ray nodes get it with their task. So the ranks, every node
and a resumed run agree whatever happens to the shared books of the machine (tokenizers/kernels/shared_books.py). Commit
copies the books into cache_config.json (`conv_plans`), where deep verify finds the one of its own environment.
"""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path

import torch

from ..errors import DamagedFile, DamagedFileWarning
from ..io import canonical_json, write_text_atomic
from ..tokenizers.kernels.plan_book import read_book
from .environment import environment_record
from .run_record import RESTART

PLANS_DIR = "conv_plans"


def environment_digest(device: str | torch.device) -> str:
    """A short digest of this process's environment record: equal digests, the same kernels on offer."""
    return hashlib.sha256(canonical_json(environment_record(device)).encode("utf-8")).hexdigest()[:16]


def write_build_book(build_dir: Path, digest: str, entries: dict[str, str]) -> None:
    """Record the book the plan pass decided for environment `digest` in the build under `build_dir`."""
    write_text_atomic(Path(build_dir) / PLANS_DIR / f"{digest}.json", canonical_json(dict(sorted(entries.items()))))


def _book_paths(build_dir: Path) -> list[Path]:
    folder = Path(build_dir) / PLANS_DIR
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def recorded_books(build_dir: Path) -> dict[str, dict[str, str]]:
    """{environment digest: {signature: plan}} of every book the build's processes wrote."""
    books = {}
    for path in _book_paths(build_dir):
        try:
            entries = read_book(path)
        except DamagedFile as damaged:
            raise DamagedFile(path, damaged.problem, f"it records the kernel plans the staged units ran; {RESTART}"
                              ) from None
        if entries:
            books[path.stem] = dict(sorted(entries.items()))
    return books


def set_aside_damaged_books(build_dir: Path, staged: bool) -> None:
    """Before units are encoded: a book of this build that no longer parses is removed, with a warning, while no
    unit is `staged` (no latent ran its plans, so they are chosen again as by a first run); once units are staged
    their plans must be the ones every later unit runs, so DamagedFile says to start over."""
    for path in _book_paths(build_dir):
        try:
            read_book(path)
        except DamagedFile as damaged:
            if staged:
                raise DamagedFile(path, damaged.problem, "it records the kernel plans the staged units ran, which "
                                  f"every later unit must run too; {RESTART}") from None
            path.unlink()
            warnings.warn(f"{path} was damaged ({damaged.problem}); no unit is staged yet, so its kernel plans are "
                          "chosen again", DamagedFileWarning, stacklevel=2)


def recorded_plans(books: dict[str, dict[str, str]] | None, device: str | torch.device) -> dict[str, str]:
    """The plans a cache records for this environment (empty when it was encoded elsewhere, or on the CPU)."""
    return dict((books or {}).get(environment_digest(device), {}))
