"""A rich progress bar per phase (done/total, samples/s, ETA that is right after a resume)."""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn


class BuildProgress:
    def __init__(self, quiet: bool = False):
        self.quiet = quiet

    @contextlib.contextmanager
    def task(self, label: str, total: int, completed: int = 0) -> Iterator[Callable[[int], None]]:
        if self.quiet:
            yield lambda n: None
            return
        columns = (
            TextColumn(f"[bold]{label:<7}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeRemainingColumn(),
        )
        with Progress(*columns, transient=False) as progress:
            # Rates and ETA count only this run's work, so a resumed build does not look instantly fast.
            task = progress.add_task(label, total=total, completed=completed, rate="")
            start = progress.get_time()
            done_here = 0

            def advance(n: int) -> None:
                nonlocal done_here
                done_here += n
                elapsed = max(progress.get_time() - start, 1e-9)
                progress.update(task, advance=n, rate=f"{done_here / elapsed:.2f} samples/s")

            yield advance
