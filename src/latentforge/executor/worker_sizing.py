"""How many CPU decode workers each rank gets: `run.workers_per_gpu` = N, or `auto` from the host's cores.

auto: on a GPU, every core of the host but one per rank (that one runs the rank's Python thread, which
launches the GPU's work) divided among the ranks, at most MAX_AUTO_WORKERS each (each worker keeps two
samples in flight, and a rank keeps a shared-memory slot per sample in flight: memory grows with workers);
on the CPU one worker per rank when the rank has two cores or more (the encoder itself uses the rest).
What this gave is in the run stats (`workers` per rank), and when the encoder waited for decoded samples
the run stats say why and how many workers would have kept up (executor/input_waits.py).
"""

from __future__ import annotations

import os

from ..config.checks import parse_workers

MAX_AUTO_WORKERS = 8


def usable_cores() -> int:
    return len(os.sched_getaffinity(0))


def decode_workers(setting: str, device: str, ranks_on_host: int, cores: int | None = None) -> int:
    """Decode workers per rank for `setting` when `ranks_on_host` ranks share this host's cores."""
    workers = parse_workers(setting)
    if workers is not None:
        return workers
    per_rank = (usable_cores() if cores is None else cores) // max(ranks_on_host, 1)
    if device.startswith("cuda"):
        return max(1, min(per_rank - 1, MAX_AUTO_WORKERS))
    return 1 if per_rank >= 2 else 0
