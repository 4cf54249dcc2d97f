"""Staged units of work under ROOT/build/staging/: one HDF5 file per unit plus a size+sha256 sidecar.

A unit counts as done only when its sidecar exists and still matches the file on disk, and the file reads back,
so a file cut short by a crash, altered afterwards or written damaged is redone on resume instead of being
committed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

import h5py
import numpy as np

from ..cache.layout import STAGING_DIR
from ..errors import CacheIntegrityError, DamagedFileWarning, one_line
from ..hashing import sha256_file
from ..io import atomic_path, canonical_json, write_text_atomic
from ..records import Reject
from ..testing.fault_points import fault_point

_UNIT_FILE = re.compile(r"^unit-(\d{6,})\.h5$")
_DONE_SUFFIX = ".done.json"
_CONDITIONING = "conditioning"  # the group of a staged unit holding its conditioning streams, one dataset each


@dataclass(frozen=True)
class StagedRow:
    """One accepted sample of a unit: everything its manifest row needs except its place in the cache."""

    sample_id: str
    source_index: int
    prompt: str
    prompt_truncated: bool
    source_path: str
    unit: int
    batch: int
    provenance: dict[str, Any]
    extra: dict[str, Any]
    unknown_token_fraction: float | None = None  # of the caption's tokens, <unk> (text/hf_encoder.py); None: unknown
    condition_frame: int | None = None  # the source frame of the image conditioning; None: no conditioning


@dataclass
class StagedUnit:
    unit: int
    rows: list[StagedRow]
    latents: np.ndarray  # [n, C, T', H', W'] storage dtype
    text_embeddings: np.ndarray | None  # [n, L, D] storage dtype
    text_lengths: np.ndarray | None  # [n]
    rejects: list[Reject]
    encoded_by: dict[str, Any] | None  # {"function", "environment"} of the rank that encoded it
    conditioning: dict[str, np.ndarray] = field(default_factory=dict)  # stream name -> [n, ...] storage dtype


@dataclass
class OpenStagedUnit:
    """A staged unit whose arrays stay on disk, so commit can copy a few rows at a time."""

    unit: int
    rows: list[StagedRow]
    latents: h5py.Dataset
    text_embeddings: h5py.Dataset | None
    text_lengths: h5py.Dataset | None
    rejects: list[Reject]
    encoded_by: dict[str, Any] | None
    conditioning: dict[str, h5py.Dataset] = field(default_factory=dict)


def staged_unit_path(build_dir: Path, unit: int) -> Path:
    return Path(build_dir) / STAGING_DIR / f"unit-{unit:06d}.h5"


def sidecar_path(path: Path) -> Path:
    """unit-N.h5 -> unit-N.h5.done.json: the unit counts as staged only while this matches it."""
    return path.with_name(path.name + _DONE_SUFFIX)


def _jsonl_bytes(items: list[dict[str, Any]]) -> np.ndarray:
    return np.frombuffer("".join(canonical_json(i) + "\n" for i in items).encode("utf-8"), dtype=np.uint8)


def _check_shapes(
    unit: int, rows: list[StagedRow], latents: np.ndarray, embeddings: np.ndarray | None, lengths: np.ndarray | None,
    conditioning: dict[str, np.ndarray],
) -> None:
    n = len(rows)
    problems = [f"conditioning {name} has {len(values)} rows, not {n}" for name, values in conditioning.items()
                if len(values) != n]
    if latents.ndim != 5 or latents.shape[0] != n:
        problems.append(f"latents shape {list(latents.shape)} is not [{n}, C, T', H', W']")
    if (embeddings is None) != (lengths is None):
        problems.append("text_embeddings and text_lengths must both be given or both be None")
    elif embeddings is not None and (embeddings.ndim != 3 or embeddings.shape[0] != n or lengths.shape != (n,)):
        problems.append(f"text shapes {list(embeddings.shape)}/{list(lengths.shape)} are not [{n}, L, D]/[{n}]")
    wrong_unit = [r.sample_id for r in rows if r.unit != unit]
    if wrong_unit:
        problems.append(f"rows {wrong_unit[:3]} do not belong to unit {unit}")
    if problems:
        raise CacheIntegrityError(f"staged unit {unit}: " + "; ".join(problems))


def write_staged_unit(
    build_dir: Path,
    unit: int,
    rows: list[StagedRow],
    latents: np.ndarray,
    text_embeddings: np.ndarray | None,
    text_lengths: np.ndarray | None,
    rejects: list[Reject],
    encoded_by: dict[str, Any] | None = None,
    conditioning: dict[str, np.ndarray] | None = None,
) -> Path:
    """Stage one finished unit; it counts for completed_units() only once its sidecar is written.
    `encoded_by` says which function in which environment encoded it (cache/encoded_by.py); `conditioning` holds
    its conditioning streams (cache/conditioning_streams.py), one row per row."""
    conditioning = conditioning or {}
    _check_shapes(unit, rows, latents, text_embeddings, text_lengths, conditioning)
    path = staged_unit_path(build_dir, unit)
    sidecar = sidecar_path(path)
    # A sidecar from an earlier attempt must never vouch for the file being replaced.
    sidecar.unlink(missing_ok=True)
    with atomic_path(path) as tmp:
        with h5py.File(tmp, "w") as handle:
            handle.attrs["unit"] = unit
            handle.create_dataset("latents", data=latents, track_times=False)
            fault_point("stage")  # test-only: a kill here leaves a half-written tmp file
            if text_embeddings is not None:
                handle.create_dataset("text_embeddings", data=text_embeddings, track_times=False)
                handle.create_dataset("text_lengths", data=text_lengths, track_times=False)
            for name, values in sorted(conditioning.items()):
                handle.create_dataset(f"{_CONDITIONING}/{name}", data=values, track_times=False)
            handle.create_dataset("rows_jsonl", data=_jsonl_bytes([asdict(r) for r in rows]), track_times=False)
            handle.create_dataset("rejects_jsonl", data=_jsonl_bytes([r.to_json() for r in rejects]), track_times=False)
            if encoded_by is not None:  # a small dataset: an attribute of this size grows the file by 4 KiB
                handle.create_dataset("encoded_by_json", data=_jsonl_bytes([encoded_by]), track_times=False)
    write_text_atomic(sidecar, canonical_json({"size": path.stat().st_size, "sha256": sha256_file(path)}))
    return path


def _sidecar_matches(path: Path) -> bool:
    try:
        done = json.loads(sidecar_path(path).read_text(encoding="utf-8"))
        if os.path.getsize(path) != done["size"]:
            return False
        return sha256_file(path) == done["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _unreadable(path: Path) -> str | None:
    """Why a staged unit that matches its sidecar still cannot be read back (written damaged), or None."""
    try:
        with open_staged_unit(path):  # reads the rows and rejects, finds the arrays
            pass
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        return one_line(error)
    return None


def completed_units(build_dir: Path) -> dict[int, Path]:
    """{unit: staged file} of every unit whose file still matches its sidecar (size and sha256) and reads back;
    one that matches but does not read is left out with a warning, so it is encoded again."""
    staging = Path(build_dir) / STAGING_DIR
    if not staging.is_dir():
        return {}
    done: dict[int, Path] = {}
    for path in sorted(staging.iterdir()):
        match = _UNIT_FILE.match(path.name)
        if match and _sidecar_matches(path):
            problem = _unreadable(path)
            if problem is None:
                done[int(match.group(1))] = path
            else:
                warnings.warn(f"{path} is damaged ({problem}) although it matches its sidecar; the unit is encoded "
                              "again", DamagedFileWarning, stacklevel=2)
    return done


def _read_jsonl(handle: h5py.File, name: str) -> list[dict[str, Any]]:
    text = handle[name][()].tobytes().decode("utf-8")
    return [json.loads(line) for line in text.splitlines()]


@contextlib.contextmanager
def open_staged_unit(path: Path) -> Iterator[OpenStagedUnit]:
    """Rows and rejects in memory, arrays left on disk until sliced."""
    with h5py.File(path, "r") as handle:
        yield OpenStagedUnit(
            unit=int(handle.attrs["unit"]),
            rows=[StagedRow(**row) for row in _read_jsonl(handle, "rows_jsonl")],
            latents=handle["latents"],
            text_embeddings=handle.get("text_embeddings"),
            text_lengths=handle.get("text_lengths"),
            rejects=[Reject.from_json(row) for row in _read_jsonl(handle, "rejects_jsonl")],
            encoded_by=_read_jsonl(handle, "encoded_by_json")[0] if "encoded_by_json" in handle else None,
            conditioning=dict(handle[_CONDITIONING].items()) if _CONDITIONING in handle else {},
        )


def read_staged_unit(path: Path) -> StagedUnit:
    """A staged unit with its arrays loaded."""
    with open_staged_unit(path) as staged:
        return StagedUnit(
            unit=staged.unit,
            rows=staged.rows,
            latents=staged.latents[()],
            text_embeddings=None if staged.text_embeddings is None else staged.text_embeddings[()],
            text_lengths=None if staged.text_lengths is None else staged.text_lengths[()],
            rejects=staged.rejects,
            encoded_by=staged.encoded_by,
            conditioning={name: values[()] for name, values in staged.conditioning.items()},
        )


def read_staged_rejects(path: Path) -> list[Reject]:
    """Only the rejects of a staged unit (what the reject limit counts before commit)."""
    with open_staged_unit(path) as staged:
        return staged.rejects
