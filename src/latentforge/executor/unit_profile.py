"""An opt-in torch profile of a few units of each rank, to see where a slow build's encoder time goes.

Set LATENTFORGE_PROFILE_DIR=DIR (and optionally LATENTFORGE_PROFILE_UNITS="SKIP,COUNT", default "2,2"): each
rank profiles its units SKIP+1 .. SKIP+COUNT (after the warm-up) and writes DIR/rank<N>-<pid>-profile.txt (the
operators by CPU and by GPU time) and DIR/rank<N>-<pid>-trace.json (open it in Perfetto or chrome://tracing).
Profiling slows the units it covers; the output of the build does not change.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator

import torch

PROFILE_DIR_ENV = "LATENTFORGE_PROFILE_DIR"
PROFILE_UNITS_ENV = "LATENTFORGE_PROFILE_UNITS"


class UnitProfiler:
    """Call `around_unit()` for every unit a rank runs; it profiles the chosen ones when the variable is set."""

    def __init__(self, rank: int, device: torch.device):
        folder = os.environ.get(PROFILE_DIR_ENV)
        skip, count = (int(v) for v in os.environ.get(PROFILE_UNITS_ENV, "2,2").split(","))
        self.folder = Path(folder) if folder else None
        self.rank, self.first, self.last = rank, skip, skip + count
        self.device = device
        self._seen = 0
        self._profiler: torch.profiler.profile | None = None

    @contextlib.contextmanager
    def around_unit(self) -> Iterator[None]:
        if self.folder is not None and self._seen == self.first:
            activities = [torch.profiler.ProfilerActivity.CPU]
            if self.device.type == "cuda":
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            self._profiler = torch.profiler.profile(activities=activities)
            self._profiler.__enter__()
        try:
            yield
        finally:
            self._seen += 1
            if self._profiler is not None and self._seen == self.last:
                self._write()

    def _write(self) -> None:
        profiler, self._profiler = self._profiler, None
        profiler.__exit__(None, None, None)
        self.folder.mkdir(parents=True, exist_ok=True)
        averages = profiler.key_averages()
        tables = [f"units {self.first + 1}..{self.last} of rank {self.rank}, by self CPU time",
                  averages.table(sort_by="self_cpu_time_total", row_limit=40)]
        if self.device.type == "cuda":
            tables += ["by self GPU time", averages.table(sort_by="self_device_time_total", row_limit=40)]
        stem = self.folder / f"rank{self.rank}-{os.getpid()}"
        stem.with_name(stem.name + "-profile.txt").write_text("\n".join(tables) + "\n", encoding="utf-8")
        profiler.export_chrome_trace(str(stem.with_name(stem.name + "-trace.json")))

    def close(self) -> None:
        """A rank that ran out of units inside the window still writes what it saw."""
        if self._profiler is not None:
            self._write()
