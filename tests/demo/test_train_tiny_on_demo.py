"""`python examples/train_tiny.py --cache demo-cache/cache`, the demo's suggestion, trains on its 9 samples."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow  # builds the demo; -m 'not slow' leaves it out


def test_train_tiny_fits_the_demo_cache(printed_runs):
    """What the printed training command printed (tests/demo/conftest.py runs each printed command once)."""
    [done] = [run for command, run in printed_runs.items() if "examples/train_tiny.py" in command]
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert "9 samples, 7 to train on in batches of 7, 2 held out" in done.stdout
    assert "held-out loss: step 0" in done.stdout
