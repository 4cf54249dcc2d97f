"""What commit needs from the models, recorded by the rank that loaded them: ROOT/build/models.json + .npz.

Commit needs the tokenizer's fingerprint, the text datasets' names, width and fingerprint, and the empty
prompt's embedding. Without this record the committing process would load the models again (minutes for
T5-11B, and a GPU on the driver of a Ray cluster). The first rank writes it right after loading the models;
resume refuses config changes, so a record left by an earlier run of the same build stays valid. When it is
missing (a build staged by an older version), commit loads the models as before.
"""

from __future__ import annotations

import json
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DamagedFileWarning, one_line
from ..io import atomic_path, canonical_json, write_text_atomic
from ..text.base import TextBatch
from .conditioning_streams import ConditioningSection
from .layout import MODEL_EMPTY_PROMPT, MODEL_RECORD


@dataclass(frozen=True)
class TextRecord:
    """The cache's text: datasets, width, the encoder's fingerprint, the empty prompt's row."""

    embeddings_dataset: str
    length_dataset: str
    prefix: str
    dim: int
    fingerprint: dict[str, Any]  # the encoder's, empty when no encoder was used (text.source=pickles)
    empty_prompt: TextBatch | None
    provenance_note: str | None  # where the encoder's weights come from, quoted in the cache README


@dataclass(frozen=True)
class ModelRecord:
    tokenizer_fingerprint: dict[str, Any]
    latent_channels: int  # per modality
    text: TextRecord | None
    conditioning: ConditioningSection | None = None  # the conditioning streams and their producers' fingerprints


def write_model_record(build_dir: Path, record: ModelRecord) -> None:
    """The .npz first, so the .json marks a complete record."""
    build_dir = Path(build_dir)
    text = record.text
    text_part: dict[str, Any] | None = None
    if text is not None:
        text_part = {
            "embeddings_dataset": text.embeddings_dataset,
            "length_dataset": text.length_dataset,
            "prefix": text.prefix,
            "dim": text.dim,
            "fingerprint": text.fingerprint,
            "provenance_note": text.provenance_note,
            "empty_prompt": text.empty_prompt is not None,
        }
        if text.empty_prompt is not None:
            with atomic_path(build_dir / MODEL_EMPTY_PROMPT) as tmp:
                with open(tmp, "wb") as handle:
                    np.savez(handle, embeddings=text.empty_prompt.embeddings, lengths=text.empty_prompt.lengths,
                             truncated=text.empty_prompt.truncated)
    payload = {"tokenizer_fingerprint": record.tokenizer_fingerprint, "latent_channels": record.latent_channels,
               "text": text_part,
               **({} if record.conditioning is None else {"conditioning": record.conditioning.to_json()})}
    write_text_atomic(build_dir / MODEL_RECORD, canonical_json(payload))


def read_model_record(build_dir: Path) -> ModelRecord | None:
    """The record, or None when it is missing, incomplete or damaged (with a warning: the models then load
    again, as for a build that left none)."""
    path = Path(build_dir) / MODEL_RECORD
    if not path.is_file():
        return None
    try:
        return _parse(Path(build_dir), json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile) as error:
        warnings.warn(f"{path} (or {MODEL_EMPTY_PROMPT} beside it) is damaged ({one_line(error)}); the models are "
                      "loaded again to make what it held", DamagedFileWarning, stacklevel=2)
        return None


def _parse(build_dir: Path, payload: dict[str, Any]) -> ModelRecord | None:
    text = payload["text"]
    record = None
    if text is not None:
        empty = None
        if text["empty_prompt"]:
            npz = build_dir / MODEL_EMPTY_PROMPT
            if not npz.is_file():
                return None
            with np.load(npz) as data:
                empty = TextBatch(data["embeddings"], data["lengths"], data["truncated"])
        record = TextRecord(text["embeddings_dataset"], text["length_dataset"], text["prefix"], text["dim"],
                            text["fingerprint"], empty, text["provenance_note"])
    conditioning = payload.get("conditioning")
    return ModelRecord(payload["tokenizer_fingerprint"], payload["latent_channels"], record,
                       None if conditioning is None else ConditioningSection.from_json(conditioning))
