"""Exports of a cache into per-sample files: musubi-tuner's Wan or HunyuanVideo cache, the LTX-2 trainer's
precomputed latents, or generic .pt dicts."""

from .run import EXPORT_RECORD, ExportReport, export_cache
from .targets import TARGETS

__all__ = ["EXPORT_RECORD", "ExportReport", "TARGETS", "export_cache"]
