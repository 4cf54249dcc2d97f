"""What ranks tell the executor that placed them, the same for a local process and a Ray actor."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union


@dataclass(frozen=True)
class UnitStaged:
    """A rank staged a unit: it is on disk and counts as done. `stats` is the rank's RankStats as JSON,
    refreshed right after the write (so a run stopped at any moment still reports its clocks)."""

    rank: int
    unit: int
    samples: int  # planned samples of the unit, accepted or not
    stats: dict[str, Any]
    node: str = ""  # where the rank runs (Ray), empty for a local rank


@dataclass(frozen=True)
class RankFinished:
    """A rank stopped: out of units (error None), or on an error, given as text (a traceback, or one line for
    a fault the user fixes outside latentforge)."""

    rank: int
    stats: dict[str, Any]
    error: str | None = None
    node: str = ""


RankEvent = Union[UnitStaged, RankFinished]
