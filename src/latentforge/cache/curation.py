"""The `captions` and `dedup` sections of cache_config.json: how a cache's captions were written and how its near
duplicates were removed (docs/cache-format.md), so a reader needs no build flags to know.

Made from the build's config, the captioner's SHA-256 its resume key holds (hashing the weights again would cost
as long as the first time) and the CLIP checkpoint's identity (whose digest the process remembers); no paths. A
section is written only while its pass runs (captions.mode other than keep, dedup.enabled), so caches built without
them keep their bytes.
"""

from __future__ import annotations

from typing import Any

from ..captions.templates import FALLBACK_BUDGET, Prompt, fallback_prompt, resolve_prompt
from ..conditioning.clip_embedding import ClipImageEmbedder
from ..config import BuildConfig

# How the near-duplicate pass decides (pipeline/near_duplicates.py), in words a reader of the cache can check.
DEDUP_RULE = ("windows in plan order; a window whose cosine similarity to an earlier kept window is >= threshold is "
              "rejected near_duplicate, naming the most similar one; similarities exactly rounded from the float32 "
              "window embeddings (the mean of the frames' unit embeddings, normalised)")


def _prompt(prompt: Prompt) -> dict[str, Any]:
    return {"name": prompt.name, "sha256": prompt.sha256, "text": prompt.text}


def captions_section(config: BuildConfig, key: dict[str, Any]) -> dict[str, Any] | None:
    """captions.*: the mode, the captioner and its weights' SHA-256, the frames it was shown, the prompts and the
    decoding settings; None under captions.mode=keep."""
    captions = config.captions
    if captions.mode == "keep":
        return None
    return {
        "mode": captions.mode,
        "captioner": captions.name,
        "model_sha256": key["captioner_sha256"],
        "frames": captions.frames,
        "resolution": captions.resolution,
        "prompt": _prompt(resolve_prompt(captions.prompt)),
        "fallback_prompt": _prompt(fallback_prompt()),
        "decoding": {"strategy": "greedy", "num_beams": 1, "max_new_tokens": captions.max_new_tokens,
                     "fallback_max_new_tokens": FALLBACK_BUDGET * captions.max_new_tokens,
                     "batch_size": captions.batch_size},
    }


def dedup_section(config: BuildConfig) -> dict[str, Any] | None:
    """dedup.*: the threshold, the frames per window, the embedder (checkpoint SHA-256, which output,
    preprocessing, precision) and the rule; None unless dedup.enabled."""
    dedup = config.dedup
    if not dedup.enabled:
        return None
    return {"threshold": dedup.threshold, "frames": dedup.frames, "batch_size": dedup.batch_size,
            "embedder": ClipImageEmbedder.identity(dedup.model), "rule": DEDUP_RULE}


def curation_sections(config: BuildConfig, key: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{"captions": ..., "dedup": ...}, each only while its pass runs."""
    sections = {"captions": captions_section(config, key), "dedup": dedup_section(config)}
    return {name: section for name, section in sections.items() if section is not None}
