"""How library functions report progress without printing.

`progress(step, total)` is called as a step starts and returns `advance(n)`, called as n more items of the
step are done, from any thread; a step that counts something other than the caller's default unit says so
with `progress(step, total, unit="bytes")`. The CLI passes its progress bars (cli/progress.py); None reports
nothing.
"""

from __future__ import annotations

from typing import Callable

Advance = Callable[[int], None]
Progress = Callable[..., Advance]  # (step: str, total: int[, unit: str]) -> Advance


def uncounted(n: int) -> None:
    """The advance of a step nobody watches."""


def start_step(progress: Progress | None, step: str, total: int, unit: str | None = None) -> Advance:
    if progress is None:
        return uncounted
    return progress(step, total, unit=unit) if unit is not None else progress(step, total)
