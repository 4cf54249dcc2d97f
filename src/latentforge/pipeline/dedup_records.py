"""build/dedup/: each window's CLIP embedding recorded by what made it, and the list of the windows the
near-duplicate pass kept, so a rerun, a resume or an --extend computes no embedding twice (docs/dedup.md).

An embedding's key is a digest of its window's identity (the video's resolved path, size and mtime_ns, the source
frames sampled) and the embedder's identity (checkpoint SHA-256, route, which output, preprocessing, precision).
One float32 .npy per window named by the key, written atomically as soon as its batch is computed, so an
interrupted pass keeps what it finished. `kept.json` lists the kept windows in plan order (source_index, sample id,
key), rewritten after each pass: an --extend compares its new windows with those of the samples already staged.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..cache.layout import DEDUP_DIR
from ..errors import DamagedFile
from ..io import canonical_json, write_bytes_atomic, write_text_atomic
from .window_frames import window_record_key

_FORMAT = 1
KEPT = "kept.json"


@dataclass(frozen=True)
class KeptWindow:
    source_index: int
    sample_id: str
    key: str  # its embedding's record


def embedding_key(video: str, frame_indices: list[int], recipe: dict[str, Any]) -> str | None:
    """The digest that names a window's embedding record; None when the video cannot be read (the decode says
    why)."""
    return window_record_key(video, frame_indices, recipe, _FORMAT)


def _path(build_dir: Path, key: str) -> Path:
    return Path(build_dir) / DEDUP_DIR / key[:2] / f"{key}.npy"


def recorded_embedding(build_dir: Path, key: str) -> np.ndarray | None:
    """The recorded float32 [D] embedding of `key`, or None (absent or damaged: computed again)."""
    try:
        vector = np.load(io.BytesIO(_path(build_dir, key).read_bytes()), allow_pickle=False)
    except (OSError, ValueError, EOFError):
        return None
    if vector.dtype != np.float32 or vector.ndim != 1 or not vector.size or not np.isfinite(vector).all():
        return None
    return vector


def record_embedding(build_dir: Path, key: str, vector: np.ndarray) -> None:
    path = _path(build_dir, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(vector, dtype=np.float32), allow_pickle=False)
    write_bytes_atomic(path, buffer.getvalue())


def read_kept(build_dir: Path) -> list[KeptWindow]:
    """The kept windows the last pass recorded, in plan order; none before a first pass."""
    path = Path(build_dir) / DEDUP_DIR / KEPT
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as error:
        raise DamagedFile(path, str(error), _REBUILD) from None
    try:
        if data["format"] != _FORMAT:
            raise ValueError(f"format {data['format']!r}, expected {_FORMAT}")
        return [KeptWindow(int(i), str(sample_id), str(key)) for i, sample_id, key in data["kept"]]
    except (KeyError, TypeError, ValueError) as error:
        raise DamagedFile(path, f"not a list of kept windows ({error})", _REBUILD) from None


def write_kept(build_dir: Path, kept: list[KeptWindow]) -> None:
    path = Path(build_dir) / DEDUP_DIR / KEPT
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [[w.source_index, w.sample_id, w.key] for w in kept]
    write_text_atomic(path, canonical_json({"format": _FORMAT, "kept": rows}) + "\n")


def kept_embedding(build_dir: Path, window: KeptWindow) -> np.ndarray:
    """A kept window's recorded embedding, which an --extend compares new windows with; DamagedFile when it is
    gone, since the window itself is not probed again."""
    vector = recorded_embedding(build_dir, window.key)
    if vector is None:
        raise DamagedFile(_path(build_dir, window.key), f"the embedding of kept sample {window.sample_id!r} is "
                          "missing or unreadable", _REBUILD)
    return vector


_REBUILD = ("the near-duplicate pass compares new windows with the kept ones recorded there; rebuild the cache "
            "from the grown input with --overwrite")
