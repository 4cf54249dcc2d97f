"""Deep verify of a cache's conditioning streams: each spot sample's streams, built again from its re-read frames
in its recorded batch, compared with the stored rows (docs/conditioning.md).

The rows are compared as the latents are: bit for bit where the build's environment is this one, else within the
tolerance of conditioning.precision (in the tokenizer's table for y, the image encoder's for its tokens) plus the
storage cast. A stream the fresh build does not produce (its encoder is gone from the config) fails."""

from __future__ import annotations

import dataclasses

import numpy as np

from .. import registry
from ..cache.check_report import CheckRecorder
from ..cache.conditioning_streams import CLIP_IMAGE_EMBEDS
from ..cache.config_file import CacheConfig
from ..cache.rows import ManifestRow
from .tolerances import Comparison, tolerance_for

CHECK = "conditioning"


def stream_comparisons(comparison: Comparison, tokenizer_precisions: dict[str, float], cache_config: CacheConfig
                       ) -> dict[str, Comparison]:
    """{stream name: the latents' comparison, its tolerance that of conditioning.precision in the table of the
    model that makes the stream (the tokenizer for image_cond_latent, the image encoder for its tokens)}."""
    section = cache_config.conditioning
    if section is None:
        return {}
    comparisons = {}
    for stream in section.streams:
        precisions = tokenizer_precisions
        if stream.name == CLIP_IMAGE_EMBEDS:
            precisions = registry.resolve("image_encoder", section.image_embeds).precisions
        comparisons[stream.name] = comparison if comparison.exact else dataclasses.replace(
            comparison, tolerance=tolerance_for(precisions, section.precision, cache_config.storage_dtype))
    return comparisons


def check_streams(rec: CheckRecorder, row: ManifestRow, stored: dict[str, np.ndarray],
                  fresh: dict[str, np.ndarray], comparisons: dict[str, Comparison]) -> bool:
    """Record a failure for every stream of `row` whose fresh values differ from the stored ones; True when all
    are bit for bit equal."""
    identical = True
    for name, values in stored.items():
        if name not in fresh:
            rec.fail(CHECK, f"dataset_index {row.dataset_index}: {name} is stored but the recorded config no longer "
                     "builds it", row.dataset_index)
            identical = False
            continue
        identical = identical and bool(np.array_equal(values, fresh[name]))
        problem = comparisons[name].problem(values, fresh[name])
        if problem:
            rec.fail(CHECK, f"dataset_index {row.dataset_index} (unit {row.unit}, batch {row.batch}): {name}: "
                     f"{problem}", row.dataset_index)
    return identical


def close_check(rec: CheckRecorder, cache_config: CacheConfig, samples: int, identical: int) -> None:
    section = cache_config.conditioning
    if section is None or not section.streams:
        return
    rec.close(CHECK, f"{', '.join(section.names)} of {samples} samples built again from their frames "
              f"({identical} bit for bit) and compared as the report's `comparison` says")
