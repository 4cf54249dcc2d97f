"""The scripts of bench/, imported as modules so tests can call their functions."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from helpers import REPO


def load_bench(name: str) -> ModuleType:
    """bench/<name>.py as the module `bench_<name>` (registered, so its dataclasses find their module)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", REPO / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def run_tiny(name: str, tmp_path: Path, *extra: str) -> dict:
    """Runs bench/<name>.py --tiny [extra] in a fresh interpreter and returns the JSON it wrote with --out."""
    out = tmp_path / f"{name}.json"
    done = subprocess.run([sys.executable, str(REPO / "bench" / f"{name}.py"), "--tiny", *extra, "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())
