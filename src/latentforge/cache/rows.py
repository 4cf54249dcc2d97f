"""Rows of manifest.jsonl, typed; rejects.jsonl rows are `records.Reject`.

A manifest line is the canonical JSON (`io.canonical_json`) of one row, keys in field order, one line per
dataset_index in order. `provenance` holds the window, crop and per-modality parameters the pipeline recorded
(docs/cache-format.md); `extra` the configured pass-through columns.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..errors import REBUILD_OR_FETCH, DamagedFile, one_line
from ..io import atomic_path, canonical_json, write_jsonl_atomic
from ..records import Reject
from .layout import MANIFEST, REJECTS


@dataclass(frozen=True)
class ManifestRow:
    dataset_index: int
    source_index: int
    sample_id: str
    shard_path: str  # relative to the cache root
    cache_row: int  # row within the shard
    prompt: str
    prompt_truncated: bool
    source_path: str  # the video path as the dataset lists it
    unit: int  # the unit of work and the batch within it that encoded the row (a re-encode redoes the batch)
    batch: int
    provenance: dict[str, Any]
    extra: dict[str, Any]
    # the share of the caption's tokens the text encoder's tokenizer does not know (<unk>), computed when the row was
    # encoded; only in rows whose text came from an encoder (None: a cache without text, a pickle row, a cache
    # written before it was recorded)
    unknown_token_fraction: float | None = None
    # the source frame index the image conditioning was taken from (pixel frame 0 of the window); only in the rows
    # of a cache that stores conditioning, so other manifests keep their bytes
    condition_frame: int | None = None

    @property
    def batch_key(self) -> tuple[int, int]:
        return self.unit, self.batch

    @property
    def frame_indices(self) -> list[int]:
        return list(self.provenance["frame_indices"])

    @property
    def timestamps(self) -> list[float]:
        return list(self.provenance["timestamps"])

    @property
    def source_fps(self) -> float | None:
        fps = self.provenance.get("source_fps")
        return None if fps is None else float(fps)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for key in OPTIONAL_KEYS:
            if data[key] is None:
                del data[key]
        return data

    def to_line(self) -> str:
        return canonical_json(self.to_json())

    @classmethod
    def from_json(cls, data: Any) -> ManifestRow:
        """ValueError unless `data` is an object with exactly the row's keys, in order (each optional key present
        or not), and an unknown_token_fraction, where present, is a number in [0, 1]."""
        if not isinstance(data, dict) or list(data) != [k for k in MANIFEST_KEYS if k in data] \
                or any(k not in data for k in MANIFEST_KEYS if k not in OPTIONAL_KEYS):
            raise ValueError(f"not an object with keys {', '.join(k for k in MANIFEST_KEYS if k not in OPTIONAL_KEYS)}"
                             f" (and, where recorded, {', '.join(OPTIONAL_KEYS)})")
        fraction = data.get("unknown_token_fraction")
        if fraction is not None and (isinstance(fraction, bool) or not isinstance(fraction, (int, float))
                                     or not 0 <= fraction <= 1):
            raise ValueError(f"unknown_token_fraction {fraction!r} is not a number in [0, 1]")
        return cls(**data)

    @classmethod
    def from_line(cls, line: str) -> ManifestRow:
        """Parse one manifest line; ValueError unless it is the canonical JSON of a row (what verify requires)."""
        data = json.loads(line)
        row = cls.from_json(data)
        if canonical_json(data) != line.rstrip("\n"):
            raise ValueError("not in canonical form (keys in order, no spaces, UTF-8)")
        return row


MANIFEST_KEYS = [f.name for f in fields(ManifestRow)]
OPTIONAL_KEYS = ("unknown_token_fraction", "condition_frame")  # left out of a row where None


def _json_lines(path: Path, skip_blank: bool) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON) of each line of a cache's JSON-lines file; DamagedFile on one that is not JSON."""
    number = 0
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if line.strip() or not skip_blank:
                    yield number, json.loads(line)
    except UnicodeDecodeError as error:
        raise DamagedFile(path, f"not UTF-8: {error}", REBUILD_OR_FETCH) from None
    except ValueError as error:
        raise DamagedFile(path, f"line {number}: {error}", REBUILD_OR_FETCH) from None


def read_manifest(root: Path) -> Iterator[ManifestRow]:
    """ROOT/manifest.jsonl one row at a time; DamagedFile naming the first line that is not a row."""
    path = Path(root) / MANIFEST
    for number, data in _json_lines(path, skip_blank=False):
        try:
            yield ManifestRow.from_json(data)
        except (ValueError, TypeError) as error:
            raise DamagedFile(path, f"line {number}: {error}", REBUILD_OR_FETCH) from None


def manifest_rows(root: Path, keep) -> list[ManifestRow]:
    """The rows for which keep(row) is true."""
    return [row for row in read_manifest(root) if keep(row)]


def read_rejects(root: Path) -> list[Reject]:
    """ROOT/rejects.jsonl; DamagedFile naming the first line that is not a reject row."""
    path = Path(root) / REJECTS
    rejects = []
    for number, data in _json_lines(path, skip_blank=True):
        try:
            rejects.append(Reject.from_json(data))
        except (KeyError, TypeError) as error:
            raise DamagedFile(path, f"line {number}: {one_line(error)}", REBUILD_OR_FETCH) from None
    return rejects


def write_manifest(root: Path, rows: Iterable[ManifestRow]) -> None:
    """ROOT/manifest.jsonl, written a block of lines at a time (never the whole text), completely or not at all."""
    with atomic_path(Path(root) / MANIFEST) as tmp, open(tmp, "wb") as handle:
        block: list[str] = []
        for row in rows:
            block.append(row.to_line())
            if len(block) == _LINES_PER_WRITE:
                handle.write(("\n".join(block) + "\n").encode("utf-8"))
                block.clear()
        if block:
            handle.write(("\n".join(block) + "\n").encode("utf-8"))


_LINES_PER_WRITE = 4096


def write_rejects(root: Path, rejects: list[Reject]) -> None:
    write_jsonl_atomic(Path(root) / REJECTS, [r.to_json() for r in rejects])
