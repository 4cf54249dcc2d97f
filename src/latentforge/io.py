"""Filesystem helpers: a file exists only after it is complete (tmp sibling, flush, fsync, os.replace)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import unicodedata
from pathlib import Path
from typing import Any, Iterator

from .errors import LatentforgeError


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(final: Path) -> Iterator[Path]:
    """Yield a tmp sibling of `final`; on success fsync it and rename it into place, else remove it."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.tmp{os.getpid()}")
    try:
        yield tmp
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, final)
        fsync_dir(final.parent)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_bytes_atomic(final: Path, data: bytes) -> None:
    with atomic_path(final) as tmp:
        tmp.write_bytes(data)


def write_text_atomic(final: Path, text: str) -> None:
    write_bytes_atomic(final, text.encode("utf-8"))


def canonical_json(value: Any) -> str:
    """One deterministic JSON text for a value (keys in insertion order, UTF-8, no spaces)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def write_jsonl_atomic(final: Path, rows: list[dict[str, Any]]) -> None:
    write_text_atomic(final, "".join(canonical_json(row) + "\n" for row in rows))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def safe_name(sample_id: str) -> str:
    """A file-name-safe, collision-free stand-in for an id: ids are never used raw in file names."""
    digest = hashlib.sha256(unicodedata.normalize("NFC", sample_id).encode("utf-8")).hexdigest()
    return digest[:32]


def inside(root: Path, path: Path) -> Path:
    """Return `path` resolved, refusing anything that would land outside `root`."""
    root_resolved = Path(root).resolve()
    resolved = Path(path).resolve()
    if resolved != root_resolved and root_resolved not in resolved.parents:
        raise LatentforgeError(f"refusing to write {path} outside the cache root {root}")
    return resolved
