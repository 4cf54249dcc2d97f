"""`python examples/train_tiny.py --cache demo-cache/cache`, the demo's suggestion, trains on its 9 samples."""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers import REPO

pytestmark = pytest.mark.slow  # builds the demo; -m 'not slow' leaves it out

EXAMPLE = REPO / "examples" / "train_tiny.py"


def test_train_tiny_fits_the_demo_cache(demo_run):
    done = subprocess.run([sys.executable, str(EXAMPLE), "--cache", "demo-cache/cache"], cwd=demo_run.cwd,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert "9 samples, 7 to train on in batches of 7, 2 held out" in done.stdout
    assert "held-out loss: step 0" in done.stdout
