"""The bytes of known caches never change by accident: the demo's cache, a committed cache of fake rows and a
tiny perception build with text each have a canonical SHA256SUMS recorded in tests/golden/ (helpers/golden.py: the
text embeddings within one float16 step of the golden values, the CPU's name and vector width left out; every
other byte exact), so they hold on any x86-64 CPU.

These goldens hold for the pinned dependencies of constraints.txt (torch, h5py, PyAV and the codecs they carry).
A change that alters them alters every user's cache; it must be deliberate, documented, and the goldens rewritten
in the same commit (`python tests/helpers/golden.py ROOT NAME` on the new cache).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import h5py
import numpy as np
import pytest

from helpers.fake_rows import build_cache
from helpers.golden import assert_golden


def test_demo_cache_is_the_golden_bytes(demo_run):
    assert_golden(demo_run.root, "demo")


def test_committed_fake_rows_are_the_golden_bytes(tmp_path):
    build_cache(tmp_path / "cache")
    assert_golden(tmp_path / "cache", "fake-rows")


def test_tiny_perception_build_is_the_golden_bytes(built_cache):
    assert_golden(built_cache, "tiny-perception")


# The canonical form itself: what it forgives (another CPU's rounding, name and width) and what it does not.


def _text_file(root: Path) -> tuple[Path, str]:
    config = json.loads((root / "cache_config.json").read_text(encoding="utf-8"))
    return next((root / "shards").glob("*.h5")), config["text"]["embeddings_dataset"]


def _nudge(path: Path, dataset: str, index: tuple[int, ...], steps: int) -> None:
    """Move one stored float16 value by `steps` float16 steps (of its bit pattern), in the file's bytes: h5py's
    write mode could touch other bytes of the file too."""
    with h5py.File(path, "r") as handle:
        stored = handle[dataset]
        chunk = stored.id.get_chunk_info_by_coord((index[0],) + (0,) * (stored.ndim - 1)).byte_offset
        offset = chunk + 2 * int(np.ravel_multi_index(index[1:], stored.shape[1:]))
    data = bytearray(path.read_bytes())
    value = np.frombuffer(bytes(data[offset:offset + 2]), "<u2")[0] + np.uint16(steps)
    data[offset:offset + 2] = np.uint16(value).astype("<u2").tobytes()
    path.write_bytes(bytes(data))


def _resummed(root: Path) -> None:
    """SHA256SUMS rewritten for the files as they are now (the canonical form hashes the files themselves)."""
    lines = [line.split("  ", 1)[1] for line in (root / "SHA256SUMS").read_text(encoding="utf-8").splitlines()]
    (root / "SHA256SUMS").write_text("".join(f"{hashlib.sha256((root / n).read_bytes()).hexdigest()}  {n}\n"
                                             for n in lines), encoding="utf-8")


def test_another_cpus_rounding_name_and_width_are_forgiven(cache):
    path, dataset = _text_file(cache)
    _nudge(path, dataset, (0, 0, 3), 1)  # one float16 step, as another vector width rounds a value
    config = (cache / "cache_config.json").read_text(encoding="utf-8")
    config = re.sub(r'"device_name": "[^"]*"', '"device_name": "Another CPU"', config)
    config = re.sub(r'"cpu_capability": "[^"]*"', '"cpu_capability": "AVX512"', config)
    (cache / "cache_config.json").write_text(config, encoding="utf-8")
    _resummed(cache)
    assert_golden(cache, "tiny-perception")


def test_a_text_value_two_steps_away_fails(cache):
    path, dataset = _text_file(cache)
    _nudge(path, dataset, (0, 0, 3), 2)
    _resummed(cache)
    with pytest.raises(AssertionError, match="beyond one float16 step"):
        assert_golden(cache, "tiny-perception")


def test_text_past_the_length_must_be_zero(cache):
    path, dataset = _text_file(cache)
    with h5py.File(path, "r") as handle:
        length = int(handle[dataset.replace("embeddings", "length")][0])
    _nudge(path, dataset, (0, length, 0), 1)
    _resummed(cache)
    with pytest.raises(AssertionError, match="not exactly 0 past"):
        assert_golden(cache, "tiny-perception")


def test_one_latent_bit_fails(cache):
    path, _ = _text_file(cache)
    config = json.loads((cache / "cache_config.json").read_text(encoding="utf-8"))
    _nudge(path, config["latent"]["dataset"], (0, 0, 0, 0, 0), 1)
    _resummed(cache)
    with pytest.raises(AssertionError, match="canonical SHA256SUMS differs"):
        assert_golden(cache, "tiny-perception")
