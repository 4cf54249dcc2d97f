"""The example scripts of examples/, imported as modules so tests can call their functions."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from helpers import REPO

TRAIN_TINY = REPO / "examples" / "train_tiny.py"
TRAIN_BUCKETS = REPO / "examples" / "train_buckets.py"
TRAIN_TOKENS = REPO / "examples" / "train_tokens.py"


def _load(name: str, path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def load_train_tiny() -> ModuleType:
    return _load("train_tiny", TRAIN_TINY)


def load_train_buckets() -> ModuleType:
    return _load("train_buckets", TRAIN_BUCKETS)


def load_train_tokens() -> ModuleType:
    return _load("train_tokens", TRAIN_TOKENS)
