"""build/captions/: each generated caption recorded by what made it, so a rerun, a resume or an --extend reads it
instead of generating it again (docs/captions.md).

A caption's key is a digest of its window's identity (the video's resolved path, size and mtime_ns, the source
frames sampled), the captioner's identity (weights and settings files' SHA-256, dtype), the prompt and fallback
texts, and the settings that shape the frames and the generation (resolution, max_new_tokens). One file per caption
named by the key, written atomically as soon as its batch is generated, so an interrupted pass keeps what it
finished. An outcome that failed (empty or over-long, also with the fallback) is recorded too: asking again with the
same inputs would give the same text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cache.layout import CAPTIONS_DIR
from ..io import canonical_json, write_text_atomic
from .window_frames import window_record_key

_FORMAT = 1


@dataclass(frozen=True)
class CaptionOutcome:
    """A window's generated caption (None: none usable), the prompt that gave it, and why it failed."""

    caption: str | None
    prompt: str  # the name of the prompt whose answer was kept (the fallback's after a retry)
    retried: bool  # the first answer was empty or over-long, and the fallback prompt was asked
    failure: str = ""  # what each attempt gave, when no answer was usable

    def to_json(self) -> dict[str, Any]:
        return {"caption": self.caption, "prompt": self.prompt, "retried": self.retried, "failure": self.failure}


def caption_key(video: str, frame_indices: list[int], recipe: dict[str, Any]) -> str | None:
    """The digest that names a window's caption record; None when the video cannot be read (the decode says why)."""
    return window_record_key(video, frame_indices, recipe, _FORMAT)


def _path(build_dir: Path, key: str) -> Path:
    return Path(build_dir) / CAPTIONS_DIR / key[:2] / f"{key}.json"


def recorded_caption(build_dir: Path, key: str) -> CaptionOutcome | None:
    """The recorded outcome of `key`, or None (absent or damaged: generated again)."""
    try:
        data = json.loads(_path(build_dir, key).read_text(encoding="utf-8"))
        caption = data["caption"]
        if data.get("key") != key or not (caption is None or isinstance(caption, str)):
            return None
        return CaptionOutcome(caption, str(data["prompt"]), bool(data["retried"]), str(data.get("failure", "")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def record_caption(build_dir: Path, key: str, sample_id: str, outcome: CaptionOutcome) -> None:
    path = _path(build_dir, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, canonical_json({"key": key, "sample_id": sample_id, **outcome.to_json()}) + "\n")
