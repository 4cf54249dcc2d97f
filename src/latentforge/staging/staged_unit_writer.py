"""Staging one finished unit (staging/staged_units.py): its shapes checked, its latents, text, conditioning
streams, rows and rejects written to unit-N.h5 whole, then the size+sha256 sidecar that makes it count as done."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from ..errors import CacheIntegrityError
from ..hashing import sha256_file
from ..io import atomic_path, canonical_json, write_text_atomic
from ..records import Reject
from ..testing.fault_points import fault_point
from .staged_text import write_staged_text
from .staged_units import CONDITIONING_GROUP, StagedRow, sidecar_path, staged_unit_path


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
    text_max_length: int | None = None,
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
                write_staged_text(handle, text_embeddings, text_lengths, text_max_length)
            for name, values in sorted(conditioning.items()):
                handle.create_dataset(f"{CONDITIONING_GROUP}/{name}", data=values, track_times=False)
            handle.create_dataset("rows_jsonl", data=_jsonl_bytes([asdict(r) for r in rows]), track_times=False)
            handle.create_dataset("rejects_jsonl", data=_jsonl_bytes([r.to_json() for r in rejects]), track_times=False)
            if encoded_by is not None:  # a small dataset: an attribute of this size grows the file by 4 KiB
                handle.create_dataset("encoded_by_json", data=_jsonl_bytes([encoded_by]), track_times=False)
    write_text_atomic(sidecar, canonical_json({"size": path.stat().st_size, "sha256": sha256_file(path)}))
    return path
