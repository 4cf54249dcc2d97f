"""Staged units of work under ROOT/build/staging/: one HDF5 file per unit plus a size+sha256 sidecar (written by
staging/staged_unit_writer.py), read back here.

A unit counts as done only when its sidecar exists and still matches the file on disk, and the file reads back,
so a file cut short by a crash, altered afterwards or written damaged is redone on resume instead of being
committed.

Once a commit is verified, each unit's arrays are in the cache, so its file gives way to a small record of its rows
(`unit-N.committed.json`, retire_staged_units): staging never holds a second copy of a committed cache. A later
commit (an extend) reads a retired unit's arrays back from the cache (staging/committed_rows.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

import h5py
import numpy as np

from ..cache.layout import STAGING_DIR
from ..errors import CacheIntegrityError, DamagedFileWarning, one_line
from ..hashing import sha256_file
from ..io import canonical_json, write_text_atomic
from ..records import Reject
from .staged_text import open_staged_text

_UNIT_FILE = re.compile(r"^unit-(\d{6,})\.h5$")
_RETIRED_FILE = re.compile(r"^unit-(\d{6,})\.committed\.json$")
_DONE_SUFFIX = ".done.json"
CONDITIONING_GROUP = "conditioning"  # the group of a staged unit holding its conditioning streams, one dataset each


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


class RowArrays(Protocol):
    """What a commit slices: an h5py dataset of a staged unit, or a retired unit's rows read back from the cache."""

    shape: tuple[int, ...]
    dtype: np.dtype

    def __getitem__(self, index: Any) -> np.ndarray: ...


# A retired unit's arrays: (rows, the cache's text storage) -> latents, text embeddings, text lengths, conditioning
CommittedArrays = Callable[[list[StagedRow]], tuple[RowArrays, RowArrays | None, RowArrays | None,
                                                    dict[str, RowArrays]]]


@dataclass
class OpenStagedUnit:
    """A staged unit whose arrays stay on disk, so commit can copy a few rows at a time."""

    unit: int
    rows: list[StagedRow]
    latents: RowArrays
    text_embeddings: RowArrays | None
    text_lengths: RowArrays | None
    rejects: list[Reject]
    encoded_by: dict[str, Any] | None
    conditioning: dict[str, RowArrays] = field(default_factory=dict)


def staged_unit_path(build_dir: Path, unit: int) -> Path:
    return Path(build_dir) / STAGING_DIR / f"unit-{unit:06d}.h5"


def retired_unit_path(build_dir: Path, unit: int) -> Path:
    return Path(build_dir) / STAGING_DIR / f"unit-{unit:06d}.committed.json"


def is_retired(path: Path) -> bool:
    """Is `path` a retired unit's record (its arrays are in the committed cache)?"""
    return bool(_RETIRED_FILE.match(Path(path).name))


def sidecar_path(path: Path) -> Path:
    """unit-N.h5 -> unit-N.h5.done.json: the unit counts as staged only while this matches it."""
    return path.with_name(path.name + _DONE_SUFFIX)


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
    """{unit: staged file} of every unit whose file still matches its sidecar (size and sha256) and reads back, or,
    for a unit whose commit retired its file, its record of rows; one that matches but does not read is left out
    with a warning, so it is encoded again."""
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
    for path in sorted(staging.iterdir()):
        match = _RETIRED_FILE.match(path.name)
        if match and int(match.group(1)) not in done and _read_retired(path) is not None:
            done[int(match.group(1))] = path
    return done


def staged_payload_bytes(build_dir: Path) -> tuple[int, int]:
    """(units whose arrays are still staged, their bytes): what staging holds beyond the committed cache."""
    staging = Path(build_dir) / STAGING_DIR
    files = [p for p in staging.iterdir() if _UNIT_FILE.match(p.name)] if staging.is_dir() else []
    return len(files), sum(p.stat().st_size for p in files)


def retire_staged_units(build_dir: Path) -> None:
    """After a verified commit: every staged unit file gives way to the record of its rows (written first, so a kill
    leaves one or the other), and unfinished unit files (no sidecar) are removed."""
    staging = Path(build_dir) / STAGING_DIR
    if not staging.is_dir():
        return
    committed = completed_units(build_dir)
    for path in sorted(staging.iterdir()):
        match = _UNIT_FILE.match(path.name)
        if not match:
            continue
        if committed.get(int(match.group(1))) == path:
            with open_staged_unit(path) as staged:
                record = {"unit": staged.unit, "rows": [asdict(r) for r in staged.rows],
                          "rejects": [r.to_json() for r in staged.rejects], "encoded_by": staged.encoded_by}
            write_text_atomic(retired_unit_path(build_dir, staged.unit), canonical_json(record) + "\n")
        sidecar_path(path).unlink(missing_ok=True)
        path.unlink()


def _read_retired(path: Path) -> dict[str, Any] | None:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(record, dict) and {"unit", "rows", "rejects", "encoded_by"} <= set(record):
            return record
    except (OSError, ValueError):
        pass
    return None


def _read_jsonl(handle: h5py.File, name: str) -> list[dict[str, Any]]:
    text = handle[name][()].tobytes().decode("utf-8")
    return [json.loads(line) for line in text.splitlines()]


@contextlib.contextmanager
def open_staged_unit(path: Path, committed: CommittedArrays | None = None) -> Iterator[OpenStagedUnit]:
    """Rows and rejects in memory, arrays left on disk until sliced. A retired unit's arrays come from `committed`
    (the cache it was committed into); without one, asking for them is a CacheIntegrityError."""
    if is_retired(path):
        yield _open_retired(Path(path), committed)
        return
    with h5py.File(path, "r") as handle:
        embeddings, lengths = open_staged_text(handle)
        yield OpenStagedUnit(
            unit=int(handle.attrs["unit"]),
            rows=[StagedRow(**row) for row in _read_jsonl(handle, "rows_jsonl")],
            latents=handle["latents"],
            text_embeddings=embeddings,
            text_lengths=lengths,
            rejects=[Reject.from_json(row) for row in _read_jsonl(handle, "rejects_jsonl")],
            encoded_by=_read_jsonl(handle, "encoded_by_json")[0] if "encoded_by_json" in handle else None,
            conditioning=dict(handle[CONDITIONING_GROUP].items()) if CONDITIONING_GROUP in handle else {},
        )


def _open_retired(path: Path, committed: CommittedArrays | None) -> OpenStagedUnit:
    record = _read_retired(path)
    if record is None:
        raise CacheIntegrityError(f"{path} is not a retired unit's record; rerun the build with --overwrite")
    rows = [StagedRow(**row) for row in record["rows"]]
    if committed is None:
        missing = _CommittedOnly(path)
        latents, embeddings, lengths, conditioning = missing, None, None, {}
    else:
        latents, embeddings, lengths, conditioning = committed(rows)
    return OpenStagedUnit(unit=int(record["unit"]), rows=rows, latents=latents, text_embeddings=embeddings,
                          text_lengths=lengths, rejects=[Reject.from_json(r) for r in record["rejects"]],
                          encoded_by=record["encoded_by"], conditioning=conditioning)


class _CommittedOnly:
    """The arrays of a retired unit opened without its cache: the commit that needs them says where they went."""

    def __init__(self, path: Path):
        self.path = path

    def __getattr__(self, name: str) -> Any:
        raise CacheIntegrityError(f"{self.path}: this unit was committed and its arrays are in the cache, not in "
                                  "staging; they are read back only by a commit into that cache in a local folder. "
                                  "Rebuild with --overwrite")

    def __getitem__(self, index: Any) -> np.ndarray:
        return self.__getattr__("rows")


def read_staged_rows(path: Path) -> list[StagedRow]:
    """Only the rows of a staged or retired unit (what a commit reads back row by row)."""
    if is_retired(path):
        record = _read_retired(Path(path))
        if record is None:
            raise CacheIntegrityError(f"{path} is not a retired unit's record; rerun the build with --overwrite")
        return [StagedRow(**row) for row in record["rows"]]
    with h5py.File(path, "r") as handle:
        return [StagedRow(**row) for row in _read_jsonl(handle, "rows_jsonl")]


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
