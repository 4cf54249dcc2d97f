"""Which tokenizer made a cache: its name and checkpoint SHA-256. Two caches, or a cache and a build, with
different identities hold latents of different functions and are never mixed (resume, reuse of a root, publish)."""

from __future__ import annotations

from typing import Any, Mapping

IDENTITY_FIELDS = ("name", "checkpoint_sha256")


def tokenizer_identity(fingerprint: Mapping[str, Any]) -> dict[str, Any]:
    """The identity fields of a tokenizer fingerprint (cache_config.json `tokenizer`)."""
    return {field: fingerprint.get(field) for field in IDENTITY_FIELDS}


def identity_differences(existing: Mapping[str, Any], new: Mapping[str, Any], existing_label: str,
                         new_label: str) -> list[str]:
    """`tokenizer.FIELD: EXISTING (existing_label) vs NEW (new_label)` for each identity field that differs."""
    return [f"tokenizer.{field}: {existing.get(field)!r} ({existing_label}) vs {new.get(field)!r} ({new_label})"
            for field in IDENTITY_FIELDS if existing.get(field) != new.get(field)]
