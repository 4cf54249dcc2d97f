"""What commit needs from the models, recorded by the rank that loaded them: ROOT/build/models.json + .npz.

Commit needs the tokenizer's fingerprint, the text datasets' names, width and fingerprint, and the empty
prompt's embedding. Without this record the committing process would load the models again (minutes for
T5-11B, and a GPU on the driver of a Ray cluster). The first rank writes it right after loading the models;
resume refuses config changes, so a record left by an earlier run of the same build stays valid. When it is
missing (a build staged by an older version), commit loads the models as before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from .config import BuildConfig
from .io import atomic_path, canonical_json, write_text_atomic
from .text.base import TextBatch, TextEncoder
from .text.source import BuildTextRecord, build_text_record
from .tokenizers.base import Tokenizer

RECORD = "models.json"
EMPTY_PROMPT = "models-empty-prompt.npz"


def write_model_record(build_dir: Path, config: BuildConfig, tokenizer: Tokenizer, text: TextEncoder | None,
                       device) -> None:
    """Record the fingerprints and the empty prompt; the .npz first, so the .json marks a complete record."""
    build_dir = Path(build_dir)
    record = build_text_record(config, text, device)
    text_part: dict[str, Any] | None = None
    if record is not None:
        text_part = {
            "embeddings_dataset": record.embeddings_dataset,
            "length_dataset": record.length_dataset,
            "prefix": record.prefix,
            "dim": record.dim,
            "fingerprint": record.fingerprint,
            "provenance_note": record.provenance_note,
            "empty_prompt": record.empty_prompt is not None,
        }
        if record.empty_prompt is not None:
            with atomic_path(build_dir / EMPTY_PROMPT) as tmp:
                with open(tmp, "wb") as handle:
                    np.savez(handle, embeddings=record.empty_prompt.embeddings, lengths=record.empty_prompt.lengths,
                             truncated=record.empty_prompt.truncated)
    payload = {
        "tokenizer_fingerprint": tokenizer.fingerprint(),
        "latent_channels": type(tokenizer).latent_channels,
        "text": text_part,
    }
    write_text_atomic(build_dir / RECORD, canonical_json(payload))


def read_model_record(build_dir: Path) -> tuple[dict[str, Any], int, BuildTextRecord | None] | None:
    """(tokenizer fingerprint, latent channels per modality, text record) or None when not recorded."""
    path = Path(build_dir) / RECORD
    if not path.is_file():
        return None
    payload = json.loads(path.read_text(encoding="utf-8"))
    text = payload["text"]
    record = None
    if text is not None:
        empty = None
        if text["empty_prompt"]:
            npz = Path(build_dir) / EMPTY_PROMPT
            if not npz.is_file():
                return None
            with np.load(npz) as data:
                empty = TextBatch(data["embeddings"], data["lengths"], data["truncated"])
        record = BuildTextRecord(text["embeddings_dataset"], text["length_dataset"], text["prefix"], text["dim"],
                                 text["fingerprint"], empty, text["provenance_note"])
    return payload["tokenizer_fingerprint"], payload["latent_channels"], record
