"""A progress callback for tests: what each step announced as its total, and what its advance calls added up to."""

from __future__ import annotations

from collections import Counter
from typing import Callable


class ProgressRecorder:
    """Pass as `progress=`; then compare `totals` (step -> total) with `done` (step -> sum of advances)."""

    def __init__(self) -> None:
        self.totals: dict[str, int] = {}
        self.units: dict[str, str | None] = {}
        self.done: Counter = Counter()

    def __call__(self, step: str, total: int, unit: str | None = None) -> Callable[[int], None]:
        self.totals[step] = total
        self.units[step] = unit
        return lambda n: self.done.update({step: n})
