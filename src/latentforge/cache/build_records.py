"""What a build records in cache_config.json of its own config, section by section (CacheConfig.for_build): the
token ids a discrete tokenizer makes, the text section, the mask and depth keys, the dataset's reader and keys."""

from __future__ import annotations

from typing import Any

from .. import registry
from ..config import BuildConfig
from ..config.checks import token_storage_dtype
from ..config.schema import TextConfig
from ..text.pickles import uses_pickles
from .config_sections import TextSection, TokenSection
from .model_record import TextRecord
from .text_rows import PADDED


def token_section(fingerprint: dict[str, Any], latent_shape: tuple[int, ...]) -> TokenSection | None:
    """What a discrete tokenizer's fingerprint says of its ids (its output, vocabulary and FSQ levels)."""
    if fingerprint.get("output") != "tokens":
        return None
    vocabulary = int(fingerprint["vocabulary"])
    levels = fingerprint.get("fsq_levels")
    _, frames, height, width = latent_shape
    return TokenSection(token_storage_dtype(vocabulary), vocabulary, None if levels is None else tuple(levels),
                        (frames, height, width))


def text_section(config: BuildConfig, text: TextRecord) -> TextSection:
    details: dict[str, Any] = {"source": config.text.source}
    if config.text.storage != PADDED:
        details["storage"] = config.text.storage
    default = TextConfig()
    if (config.text.on_unknown, config.text.max_unknown_fraction) != (default.on_unknown,
                                                                       default.max_unknown_fraction):
        # recorded only when set, so caches built with the defaults keep their bytes
        details.update(on_unknown=config.text.on_unknown, max_unknown_fraction=config.text.max_unknown_fraction)
    if uses_pickles(config.text):
        lookup = registry.resolve("reader", config.dataset.reader).pickle_lookup_rule(config)
        details["pickles"] = {"format": "cosmos-t5-pickle", "lookup": lookup}
    details.update({k: v for k, v in text.fingerprint.items() if k not in ("name", "max_length", "dim")})
    return TextSection(config.text.name, text.embeddings_dataset, text.length_dataset, text.dim,
                       config.text.max_length, config.text.empty_prompt, details)


def modality_keys(section: Any) -> dict[str, Any]:
    """A mask or depth section's keys; fps only when set, so caches built before the key keep their bytes."""
    return {k: v for k, v in vars(section).items() if k != "fps" or v != "source"}


def dataset_record(config: BuildConfig) -> dict[str, Any]:
    """The dataset section less its locations: the reader, its own keys, then the common ones."""
    dataset = config.dataset
    reader = registry.resolve("reader", dataset.reader)
    return {"reader": dataset.reader, **reader.recorded_keys(dataset.options),
            "on_missing_caption": dataset.on_missing_caption}
