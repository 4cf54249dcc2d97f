"""Kernel plans shared between builds: a folder of plan books, one per GPU model, cuDNN and cuDNN frontend.

Every build on a machine asks the same book, so a convolution signature is timed once per environment (by the
first build that meets it) and every later build, rank, resume and process replays that plan: two fresh builds of
the same input on the same GPU model and software give the same bytes. The folder is `tokenizer.conv_plans_dir`,
else $XDG_CACHE_HOME/latentforge/conv-plans (~/.cache/...). Books that ship with latentforge (measured on the GPU
models they are named for, for the fast path's common shapes) seed it, so machines of those models agree even
before they share a folder; copy a book file to another machine of the same model to make it agree too.
"""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path

import torch

from .families import plans_key
from .plan_book import PlanBook

SHIPPED_FOLDER = "books"  # beside this module, one JSON book per plans_key


def default_plans_dir() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "latentforge" / "conv-plans"


def shipped_book(key: str) -> PlanBook:
    """The plans latentforge ships for this environment (an empty book when none ship)."""
    source = resources.files(__package__) / SHIPPED_FOLDER / f"{key}.json"
    entries = json.loads(source.read_text(encoding="utf-8")) if source.is_file() else {}
    return PlanBook(entries=entries)


def shared_plan_book(device: torch.device, folder: str | None) -> PlanBook:
    """This environment's book in `folder` (default_plans_dir() when None), seeded from the shipped one."""
    key = plans_key(device)
    return PlanBook(Path(folder or default_plans_dir()) / f"{key}.json", parent=shipped_book(key))
