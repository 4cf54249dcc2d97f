"""`latentforge verify ROOT`: the integrity checks, or with deep=True the deep verify on top of them."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ..cache.check_report import VerifyReport
from ..cache.integrity import verify_integrity
from .deep import DEFAULT_SPOT, DeepReport, verify_deep
from .quality import QualityThresholds
from .reencode import Overrides


def verify(root: str | Path, *, deep: bool = False, require_complete: bool = True, spot: int = DEFAULT_SPOT,
           indices: list[int] | None = None, overrides: Overrides = Overrides(),
           thresholds: QualityThresholds = QualityThresholds(), report_path: Path | None = None,
           progress: Callable[[str, int], Callable[[int], None]] | None = None) -> VerifyReport | DeepReport:
    """Is the cache at `root` intact (its own records, SHA256SUMS, shapes, NaN, padding), and with `deep`, does
    it hold what its sources, tokenizer and text encoder give? The report's `ok` is the verdict; `progress` is
    verify_deep's (deep only)."""
    if not deep:
        return verify_integrity(Path(root), require_complete)
    return verify_deep(Path(root), spot, overrides, thresholds, indices, require_complete, report_path, progress)
