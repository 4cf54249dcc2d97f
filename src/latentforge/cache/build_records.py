"""What a build records in cache_config.json of its own config, and the build config read back from it: the file
a build writes (cache_config_for_build), section by section (the token ids a discrete tokenizer makes, the text
section, the mask and depth keys, the dataset's reader and keys), and the build config data a re-encode starts
from (build_config_data)."""

from __future__ import annotations

from typing import Any

from .. import registry
from ..config import BuildConfig
from ..config.checks import token_storage_dtype
from ..config.schema import TextConfig, single_shape_frames
from ..text.base import POSITIONS
from ..text.pickles import uses_pickles
from ..version import __version__
from .audio_section import AudioSection
from .conditioning_streams import ConditioningSection, ConditioningStream
from .config_file import PIXEL_RANGE, CacheConfig
from .config_sections import CONDITIONING_ROLE, LatentSection, ModalityEntry, TextSection, TokenSection
from .model_record import TextRecord
from .text_rows import PADDED


def cache_config_for_build(config: BuildConfig, latent_shape: tuple[int, ...], tokenizer_fingerprint: dict[str, Any],
                           text: TextRecord | None, latent_channels: int,
                           conditioning: ConditioningSection | None = None,
                           side_streams: tuple[ConditioningStream, ...] = (),
                           curation: dict[str, dict[str, Any]] | None = None,
                           audio: AudioSection | None = None) -> CacheConfig:
    """What a build writes, with num_samples/num_shards at 0 until commit counts them. `curation`: the captions
    and dedup sections (cache/curation.py)."""
    names = list(config.modalities.names)
    modalities = tuple(ModalityEntry(name, (i * latent_channels, (i + 1) * latent_channels),
                                     CONDITIONING_ROLE if name == "rgb" else "target")
                       for i, name in enumerate(names))
    return CacheConfig(
        latentforge_version=__version__,
        preset=config.preset,
        num_samples=0,
        num_shards=0,
        rows_per_shard=config.output.rows_per_shard,
        storage_dtype=config.output.storage_dtype,
        latent=LatentSection(config.output.latent_dataset, tuple(latent_shape), modalities, "rgb", (0, 1),
                             "tokenizer", token_section(tokenizer_fingerprint, latent_shape)),
        tokenizer=dict(tokenizer_fingerprint),
        text=None if text is None else text_section(config, text),
        frames={**single_shape_frames(config.frames), "pixel_range": PIXEL_RANGE},
        modalities={"names": names,
                    "mask": modality_keys(config.modalities.mask) if "mask" in names else None,
                    "depth": modality_keys(config.modalities.depth) if "depth" in names else None},
        dataset=dataset_record(config),
        build={"unit_size": config.output.unit_size, "batch_size": config.output.batch_size,
               "seed": config.run.seed},
        conditioning=conditioning,
        side_streams=side_streams,
        captions=(curation or {}).get("captions"),
        dedup=(curation or {}).get("dedup"),
        audio=audio,
    )


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


def build_config_data(cache_config: CacheConfig) -> dict[str, Any]:
    """The build config as far as cache_config.json records it (no paths: a re-encode supplies them)."""
    text = cache_config.text
    build = cache_config.build or {}
    return {
        "preset": cache_config.preset,
        "dataset": dict(cache_config.dataset or {}),
        "frames": {k: v for k, v in cache_config.frames.items() if k != "pixel_range"},
        "modalities": {k: v for k, v in (cache_config.modalities or {}).items() if v is not None},
        "tokenizer": {"name": cache_config.tokenizer_name, "precision": cache_config.precision},
        "text": {"name": "none"} if text is None else {
            "name": text.name, "max_length": text.max_length, "empty_prompt": text.empty_prompt,
            "precision": text.precision, "padding": _text_padding(text)},
        "output": {"latent_dataset": cache_config.latent.dataset, "rows_per_shard": cache_config.rows_per_shard,
                   "storage_dtype": cache_config.storage_dtype, "unit_size": build["unit_size"],
                   "batch_size": build["batch_size"]},
        "run": {"seed": build["seed"]},
        **({} if cache_config.conditioning is None else {"conditioning": {
            "image_latent": cache_config.conditioning.image_latent,
            "image_embeds": cache_config.conditioning.image_embeds,
            "precision": cache_config.conditioning.precision}}),
    }


def _text_padding(text: TextSection) -> str:
    """text.padding from the encoder's recorded positions (caches from before the key ran each prompt alone)."""
    padding = {positions: setting for setting, positions in POSITIONS.items()}
    return padding.get(text.details.get("positions"), "none")
