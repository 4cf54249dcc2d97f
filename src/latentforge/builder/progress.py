"""Rich progress bars: one row per step with done/total, rate and an ETA that is right after a resume."""

from __future__ import annotations

import contextlib
import threading
from typing import Callable, Iterator

from rich.console import Console
from rich.filesize import decimal
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)

BYTES = "bytes"  # the unit whose amounts and rates print as sizes (12.3/45.6 MB, 7.8 MB/s)


class _Amount(ProgressColumn):
    """done/total in the row's own unit: sizes for bytes, counts otherwise."""

    def __init__(self) -> None:
        super().__init__()
        self._sizes, self._counts = DownloadColumn(), MofNCompleteColumn()

    def render(self, task):  # noqa: ANN001 - rich's Task
        return (self._sizes if task.fields.get("unit") == BYTES else self._counts).render(task)


class ProgressBars:
    """A rich Progress for the life of a `with` block; start() adds a row and returns its advance(n), which
    any thread may call. Rates and ETAs count only the work advanced here, so a resumed step does not look
    instantly fast."""

    def __init__(self, unit: str = "samples", console: Console | None = None):
        self.unit = unit
        self._progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), _Amount(),
                                  TextColumn("{task.fields[rate]}"), TimeRemainingColumn(), console=console)
        self._started = False

    def __enter__(self) -> ProgressBars:
        return self  # the display starts with the first row: a verb that fails before any step prints no blank line

    def __exit__(self, *exc_info: object) -> None:
        if self._started:
            self._progress.stop()

    def start(self, label: str, total: int, completed: int = 0, unit: str | None = None) -> Callable[[int], None]:
        """A row for one step; `unit` (default: the bars' unit) says what `total` counts."""
        progress = self._progress
        if not self._started:
            progress.start()
            self._started = True
        unit = unit or self.unit
        # A step with nothing to do gets no row.
        task = progress.add_task(f"{label:<7}", total=total, completed=completed, rate="", unit=unit,
                                 visible=total > 0)
        began = progress.get_time()
        done_here = 0
        lock = threading.Lock()

        def advance(n: int) -> None:
            nonlocal done_here
            with lock:
                done_here += n
                rate = done_here / max(progress.get_time() - began, 1e-9)
            shown = f"{decimal(int(rate))}/s" if unit == BYTES else f"{rate:.2f} {unit}/s"
            progress.update(task, advance=n, rate=shown)

        return advance

    def say(self, text: str) -> None:
        """Print a line above the bars."""
        self._progress.console.print(text)


class BuildProgress:
    """One bar per build phase on stdout, or none when quiet."""

    def __init__(self, quiet: bool = False):
        self.quiet = quiet

    @contextlib.contextmanager
    def task(self, label: str, total: int, completed: int = 0) -> Iterator[Callable[[int], None]]:
        if self.quiet:
            yield lambda n: None
            return
        with ProgressBars("samples") as bars:
            yield bars.start(label, total, completed)
