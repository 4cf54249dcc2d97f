"""The scripts of bench/, imported as modules so tests can call their functions."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from helpers import REPO


def load_bench(name: str) -> ModuleType:
    """bench/<name>.py as the module `bench_<name>` (registered, so its dataclasses find their module)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", REPO / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
