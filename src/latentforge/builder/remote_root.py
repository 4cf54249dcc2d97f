"""A sink whose root may be a URL (webdataset) keeps its build records apart from the root, so a rerun on
another machine, or after the node-local records were cleared, finds no run.json to compare with. Before any
model loads, the cache already at the root is compared with this build instead: a cache of another
tokenizer, another sink or other settings (the captions' and near-duplicate settings too) is refused unless
--overwrite (its objects would be replaced one by one, and a reader in between would see shards of two builds)."""

from __future__ import annotations

import json
from typing import Any

from .. import registry
from ..cache.build_records import cache_config_for_build
from ..cache.curation import curation_sections
from ..cache.root import CacheRoot, sink_in
from ..cache.text_rows import PADDED
from ..cache.tokenizer_identity import identity_differences, tokenizer_identity
from ..config import BuildConfig
from ..errors import LatentforgeError

# The cache_config.json sections a build writes from its config alone (no model needed to know them).
_SETTINGS = ("preset", "storage_dtype", "frames", "modalities", "dataset", "build")
_ADVICE = "rerun with --overwrite to replace it, or build into another output root"


def check_remote_cache(config: BuildConfig, key: dict[str, Any]) -> None:
    """Refuse, listing what differs, when output.root holds a cache this build would not write."""
    root = config.output.root
    existing = CacheRoot.of(root).read_config()
    if existing is None:
        return
    if sink_in(existing) != config.output.sink:
        raise LatentforgeError(f"{root} holds a cache written by output.sink={sink_in(existing)!r}; refusing to "
                               f"write output.sink={config.output.sink!r} objects over it; {_ADVICE}")
    new = {"name": config.tokenizer.name, "checkpoint_sha256": key["tokenizer_sha256"]}
    differences = identity_differences(tokenizer_identity(existing.get("tokenizer") or {}), new, "the cache",
                                       "this build")
    ours = _settings(config)
    ours["text"] = None if config.text.name == "none" else _text(
        {"name": config.text.name, "max_length": config.text.max_length, "source": config.text.source,
         "storage": config.text.storage})
    curation = json.loads(json.dumps(curation_sections(config, key)))  # as the cache's JSON holds them
    ours.update({name: curation.get(name) for name in ("captions", "dedup")})
    existing = {**existing, "text": _text(existing.get("text"))}
    differences += [f"{name}: {existing.get(name)!r} (the cache) vs {ours[name]!r} (this build)"
                    for name in ours if existing.get(name) != ours[name]]
    if differences:
        raise LatentforgeError(f"{root} holds a cache made by another tokenizer or with other settings; refusing to "
                               "replace it:\n  " + "\n  ".join(differences) + f"\n{_ADVICE}")


def _settings(config: BuildConfig) -> dict[str, Any]:
    """What this build will write in those sections, plus the text model's name and length and the sink's own
    section."""
    written = cache_config_for_build(config, (0,), {}, None, 0).to_json()
    settings = {name: written.get(name) for name in _SETTINGS}
    settings["sink"] = registry.resolve("sink", config.output.sink).record(config.output)
    return json.loads(json.dumps(settings))  # as the cache's JSON holds them (lists, not tuples)


def _text(text: dict[str, Any] | None) -> dict[str, Any] | None:
    """The text section's encoder, length and storage (its dim and fingerprint need the model)."""
    if not text:
        return None
    return {"name": text.get("name"), "max_length": text.get("max_length"), "source": text.get("source"),
            "storage": text.get("storage", PADDED)}
