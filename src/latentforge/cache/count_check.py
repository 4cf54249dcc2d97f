"""The check every sink's integrity verify runs on cache_config.json's counts: nothing planned went missing."""

from __future__ import annotations

from .check_report import CheckRecorder
from .config_file import CacheConfig
from .layout import REJECTS


def check_counts(config: CacheConfig, rejected: int, rec: CheckRecorder) -> None:
    """Nothing planned went missing: cache_config.json's num_planned = num_samples + num_rejected, and
    num_rejected is what rejects.jsonl lists (num_samples is checked against the manifest)."""
    if config.num_planned is None:
        rec.close("counts", "cache_config.json records no planned count (a cache written before it did)")
        return
    if config.num_rejected != rejected:
        rec.fail("counts", f"cache_config.json counts {config.num_rejected} rejects, {REJECTS} lists {rejected}")
    if config.num_samples + config.num_rejected != config.num_planned:
        rec.fail("counts", f"{config.num_planned} samples were planned, but the cache keeps {config.num_samples} "
                 f"and rejects {config.num_rejected}: {config.num_planned - config.num_samples - config.num_rejected}"
                 " are unaccounted for; rebuild the cache")
    rec.close("counts", f"{config.num_planned} planned = {config.num_samples} kept + {config.num_rejected} rejected")
