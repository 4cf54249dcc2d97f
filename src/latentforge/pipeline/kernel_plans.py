"""The kernel plans a build ran: ROOT/build/conv_plans/<environment digest>.json, one book per environment.

Every process of a build in one environment (device model and software, pipeline/environment.py) looks its
plans up in that book first, so the ranks and a resumed run agree whatever happens to the shared books of the
machine (tokenizers/shared_plans.py). Commit copies the books into cache_config.json (`conv_plans`), where deep
verify finds the one of its own environment.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch

from ..io import canonical_json
from .environment import environment_record

PLANS_DIR = "conv_plans"


def environment_digest(device: str | torch.device) -> str:
    """A short digest of this process's environment record: equal digests, the same kernels on offer."""
    return hashlib.sha256(canonical_json(environment_record(device)).encode("utf-8")).hexdigest()[:16]


def build_plans_path(build_dir: Path, device: str | torch.device) -> Path:
    """This environment's book of the build under `build_dir`."""
    return Path(build_dir) / PLANS_DIR / f"{environment_digest(device)}.json"


def recorded_books(build_dir: Path) -> dict[str, dict[str, str]]:
    """{environment digest: {signature: plan}} of every book the build's processes wrote."""
    folder = Path(build_dir) / PLANS_DIR
    books = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        entries = json.loads(path.read_text(encoding="utf-8"))
        if entries:
            books[path.stem] = dict(sorted(entries.items()))
    return books


def recorded_plans(books: dict[str, dict[str, str]] | None, device: str | torch.device) -> dict[str, str]:
    """The plans a cache records for this environment (empty when it was encoded elsewhere, or on the CPU)."""
    return dict((books or {}).get(environment_digest(device), {}))
