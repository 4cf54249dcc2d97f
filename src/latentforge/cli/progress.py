"""The progress bars of the long verbs, on stderr: one row per step, with done/total, rate and time left."""

from __future__ import annotations

import contextlib
from typing import Iterator

from ..builder.progress import ProgressBars
from .common import console


@contextlib.contextmanager
def progress_bars(unit: str) -> Iterator[ProgressBars]:
    """Bars for the life of the block; pass `bars.start` as the library's `progress` argument (unit "bytes"
    shows sizes)."""
    with ProgressBars(unit, console(stderr=True)) as bars:
        yield bars
