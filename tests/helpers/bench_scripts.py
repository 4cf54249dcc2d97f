"""The scripts of bench/, imported as modules so tests can call their functions."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from helpers import REPO


def load_bench(path: str) -> ModuleType:
    """bench/<path>.py (e.g. "tools/retime_book") as the module `bench_<file name>` (registered, so its dataclasses
    find their module)."""
    script = REPO / "bench" / f"{path}.py"
    spec = importlib.util.spec_from_file_location(f"bench_{script.stem}", script)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def run_tiny(path: str, tmp_path: Path, *extra: str) -> dict:
    """Runs bench/<path>.py --tiny [extra] in a fresh interpreter and returns the JSON it wrote with --out."""
    script = REPO / "bench" / f"{path}.py"
    out = tmp_path / f"{script.stem}.json"
    done = subprocess.run([sys.executable, str(script), "--tiny", *extra, "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())
