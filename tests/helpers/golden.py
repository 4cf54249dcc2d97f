"""Golden caches that hold on any x86-64 CPU: the SHA256SUMS of a cache in its canonical form.

What a build computes without rounding that depends on the CPU (frames, the haar tokenizer's latents, whose
sums are exact, rows, manifest, rejects, the layout of every file) is the same bits on every CPU and is compared
byte for byte. Two things are not:
- text embeddings: the text encoder's float32 matmuls and softmax round differently with another vector width
  (AVX2, AVX-512), which moves about 0.3 % of the float16 values stored by one step. They are compared with
  the golden values in tests/golden/<name>.text.npz within TEXT_TOLERANCE (the padding past each prompt's
  length exactly 0), then those golden values are written over them in a copy of the file before it is hashed;
- the CPU's name and vector width in cache_config.json's `encoded_by` environment, replaced by "*" before
  hashing.
Everything else in those files stays in the hash, so an accidental change anywhere still fails.

The bytes hold for the pinned packages of constraints.txt on a CPU build of torch (the environment CI runs);
elsewhere (a GPU machine's own torch, other versions) assert_golden skips, saying what differs, instead of failing.

To record new goldens after a deliberate change (on any CPU, in the pinned environment):
    python tests/helpers/golden.py ROOT NAME    # writes tests/golden/NAME.SHA256SUMS and NAME.text.npz
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

import h5py
import numpy as np

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
CPU_FIELDS = ("device_name", "cpu_capability")  # of a CPU environment record: which CPU, which vector width
# |stored - golden| <= one float16 step of the larger value + ABSOLUTE near 0 (a float32 result of about 1e-6
# absolute error lands on a fine float16 grid there), in at most MAX_FRACTION of a file's text values
TEXT_TOLERANCE = {"absolute": 2.0**-16, "max_fraction": 0.02}


def canonical_sums(root: Path, text_golden: dict[str, np.ndarray]) -> str:
    """ROOT's SHA256SUMS as the canonical form's: the same lines, each hash taken of the canonical bytes."""
    config = json.loads((root / "cache_config.json").read_text(encoding="utf-8"))
    lines = []
    for line in (root / "SHA256SUMS").read_text(encoding="utf-8").splitlines():
        name = line.split("  ", 1)[1]
        data = canonical_bytes(root, name, config, text_golden)
        lines.append(f"{hashlib.sha256(data).hexdigest()}  {name}\n")
    return "".join(lines)


def canonical_bytes(root: Path, name: str, config: dict, text_golden: dict[str, np.ndarray]) -> bytes:
    data = (root / name).read_bytes()
    if name == "cache_config.json":
        return _without_cpu_fields(data)
    text = _encoded_text(config)
    if name.endswith(".h5") and text:
        return _with_golden_text(root / name, name, data, text, text_golden)
    return data


def _encoded_text(config: dict) -> dict | None:
    """The text section when this build ran a text encoder (text read from pickles or rows is exact)."""
    text = config.get("text") or {}
    return text if text.get("source") == "encoder" and text.get("embeddings_dataset") else None


def _without_cpu_fields(data: bytes) -> bytes:
    text = data.decode("utf-8")
    for field in CPU_FIELDS:
        text = re.sub(rf'("{field}": )"[^"]*"', r'\1"*"', text)
    return text.encode("utf-8")


def text_key(name: str, dataset: str) -> str:
    return f"{name}::{dataset}"


def valid_text(path: Path, text: dict) -> tuple[np.ndarray, np.ndarray]:
    """(the stored embeddings of every row's first `length` positions, stacked [sum of lengths, dim]; lengths)."""
    with h5py.File(path, "r") as handle:
        embeddings = handle[text["embeddings_dataset"]][()]
        lengths = handle[text["length_dataset"]][()].astype(np.int64)
    padding = np.concatenate([row[length:].ravel() for row, length in zip(embeddings, lengths)])
    if padding.view(np.uint16).any():
        raise AssertionError(f"{path}: text embeddings are not exactly 0 past their rows' lengths")
    return np.concatenate([row[:length] for row, length in zip(embeddings, lengths)]), lengths


def text_problem(stored: np.ndarray, golden: np.ndarray) -> str | None:
    """None when `stored` is within TEXT_TOLERANCE of `golden`, else what differs."""
    if stored.shape != golden.shape:
        return f"shape {list(stored.shape)}, golden {list(golden.shape)}"
    a, b = stored.astype(np.float64), golden.astype(np.float64)
    step = np.spacing(np.maximum(np.abs(stored), np.abs(golden))).astype(np.float64)
    far = np.abs(a - b) > step + TEXT_TOLERANCE["absolute"]
    moved = float((a != b).mean())
    if far.any() or moved > TEXT_TOLERANCE["max_fraction"]:
        return (f"{int(far.sum())} values beyond one float16 step, {moved:.2%} of values moved (max |diff| "
                f"{np.abs(a - b).max():.3g}; tolerance: one step + {TEXT_TOLERANCE['absolute']:.3g}, at most "
                f"{TEXT_TOLERANCE['max_fraction']:.0%} moved)")
    return None


def _with_golden_text(path: Path, name: str, data: bytes, text: dict, text_golden: dict[str, np.ndarray]) -> bytes:
    """The file's bytes with each row's valid text positions replaced by the golden values, once they are checked
    to be within tolerance (single-sample chunks without filters: each row's values lie at its chunk's offset)."""
    stored, lengths = valid_text(path, text)
    key = text_key(name, text["embeddings_dataset"])
    if key not in text_golden:
        raise AssertionError(f"no golden text values for {key}")
    problem = text_problem(stored, text_golden[key])
    if problem:
        raise AssertionError(f"{name}: {text['embeddings_dataset']} differs from the golden values: {problem}")
    out = bytearray(data)
    golden_rows = np.split(text_golden[key], np.cumsum(lengths)[:-1])
    with h5py.File(path, "r") as handle:
        dataset = handle[text["embeddings_dataset"]]
        if dataset.chunks != (1, *dataset.shape[1:]) or dataset.compression is not None:
            raise AssertionError(f"{name}: {text['embeddings_dataset']} is not stored in single-sample chunks "
                                 "without filters")
        for row, values in enumerate(golden_rows):
            offset = dataset.id.get_chunk_info_by_coord((row, 0, 0)).byte_offset
            raw = np.ascontiguousarray(values, dtype="<f2").tobytes()
            out[offset:offset + len(raw)] = raw
    return bytes(out)


def read_text_golden(name: str) -> dict[str, np.ndarray]:
    path = GOLDEN / f"{name}.text.npz"
    if not path.is_file():
        return {}
    with np.load(path) as values:
        return {key: values[key] for key in values.files}


# the packages whose arithmetic or file writing the golden bytes depend on, by their distribution names
PINNED_PACKAGES = ("torch", "numpy", "h5py", "av", "transformers", "tokenizers", "pyarrow")


def unpinned_environment() -> list[str]:
    """What differs here from the environment the goldens hold in (constraints.txt's pins, torch's CPU build)."""
    from importlib import metadata

    import torch

    pins = dict(line.split("==", 1) for line in (GOLDEN.parents[1] / "constraints.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    found = [f"{name} {metadata.version(name)} (pinned {pins[name]})" for name in PINNED_PACKAGES
             if name in pins and metadata.version(name).split("+")[0] != pins[name]]
    if torch.version.cuda is not None or torch.cuda.is_available():
        found.append(f"torch {torch.__version__} is a CUDA build (the goldens are made with the CPU build)")
    return found


def assert_golden(root: Path, name: str) -> None:
    import pytest

    differs = unpinned_environment()
    if differs:
        pytest.skip("the golden bytes hold in the pinned CPU environment of constraints.txt; here "
                    + ", ".join(differs))
    got = canonical_sums(root, read_text_golden(name))
    want = (GOLDEN / f"{name}.SHA256SUMS").read_text(encoding="utf-8")
    assert got == want, f"{root}: canonical SHA256SUMS differs from tests/golden/{name}.SHA256SUMS:\n{got}"


def write_golden(root: Path, name: str) -> None:
    """Record ROOT as the golden NAME: its text values (when it has text) and its canonical SHA256SUMS."""
    text = _encoded_text(json.loads((root / "cache_config.json").read_text(encoding="utf-8")))
    values = {}
    if text:
        for line in (root / "SHA256SUMS").read_text(encoding="utf-8").splitlines():
            file = line.split("  ", 1)[1]
            if file.endswith(".h5"):
                values[text_key(file, text["embeddings_dataset"])] = valid_text(root / file, text)[0]
    npz = GOLDEN / f"{name}.text.npz"
    if values:
        np.savez_compressed(npz, **values)
    elif npz.exists():
        npz.unlink()
    (GOLDEN / f"{name}.SHA256SUMS").write_text(canonical_sums(root, values), encoding="utf-8")


if __name__ == "__main__":
    write_golden(Path(sys.argv[1]), sys.argv[2])
