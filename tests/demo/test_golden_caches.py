"""The bytes of known caches never change by accident: the demo's cache, a committed cache of fake rows and a
tiny perception build with text each have a SHA256SUMS recorded in tests/golden/.

These goldens hold for the pinned dependencies of constraints.txt (torch, h5py, PyAV and the codecs they
carry) on the CPU model CI runs on: cache_config.json records the environment that encoded the units (device
model, torch, latentforge). A change that alters them alters every user's cache; it must be deliberate,
documented, and the golden files rewritten in the same commit (copy the new SHA256SUMS over
tests/golden/<name>.SHA256SUMS).
"""

from __future__ import annotations

from pathlib import Path

from helpers import REPO
from helpers.fake_rows import build_cache

GOLDEN = REPO / "tests" / "golden"


def assert_golden(root: Path, name: str) -> None:
    got = (root / "SHA256SUMS").read_text(encoding="utf-8")
    want = (GOLDEN / f"{name}.SHA256SUMS").read_text(encoding="utf-8")
    assert got == want, f"{root}: SHA256SUMS differs from tests/golden/{name}.SHA256SUMS:\n{got}"


def test_demo_cache_is_the_golden_bytes(demo_run):
    assert_golden(demo_run.root, "demo")


def test_committed_fake_rows_are_the_golden_bytes(tmp_path):
    build_cache(tmp_path / "cache")
    assert_golden(tmp_path / "cache", "fake-rows")


def test_tiny_perception_build_is_the_golden_bytes(built_cache):
    assert_golden(built_cache, "tiny-perception")
