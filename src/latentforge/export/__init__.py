"""Exports of a cache into trainers' own per-sample cache files (musubi-tuner, LTX-2-style .pt)."""

from .run import EXPORT_RECORD, ExportReport, export_cache
from .targets import TARGETS

__all__ = ["EXPORT_RECORD", "ExportReport", "TARGETS", "export_cache"]
