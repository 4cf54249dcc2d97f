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


def rank_torch_threads(device: str, ranks_on_host: int, workers: int, cores: int | None = None) -> int | None:
    """torch's CPU threads in a rank (None: torch's default, one per core).

    - CPU ranks split the host's cores (one rank keeps the default).
    - A GPU rank with decode workers runs 1: its own CPU steps are small (launching kernels, an I2V build's image
      processor), and torch's default pool of one thread per core spun every thread after each such step: 0.42
      core-s per I2V sample on a 16-core H200 host (bench/encode/encode_i2v.py --host-cpu-batches), taken from the
      decode workers' cores. Without workers the rank decodes and resizes itself, with torch's default."""
    if device.startswith("cuda"):
        return 1 if workers > 0 else None
    if ranks_on_host <= 1:
        return None
    return max(1, (usable_cores() if cores is None else cores) // ranks_on_host)
