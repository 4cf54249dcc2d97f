"""The probe of a whole plan spread over processes: each video is decoded once from its start (decode/stream_probe.py),
which costs about a second of CPU per 10 s of 720p, so a large input is probed by every core of the host before any
GPU work starts, the windows of one video in one process. Small inputs are probed in the main process, where
starting processes would cost more than it saves. The results are those of pipeline.probe.probe_all, whatever the
split. The Ray executor spreads the same groups over its cluster instead (executor/ray/probe_task.py)."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, as_completed

from ..config import BuildConfig
from ..config.checks import parse_workers
from ..pipeline.probe import ProbeResult, probe_all, probe_samples
from ..progress import Advance, uncounted
from ..records import Reject, Sample
from .process_setup import child_process_setup

PARALLEL_FROM = 32  # distinct videos from which the probe starts processes of its own (each imports the package)
_MOST = 16  # processes under auto: each holds a decoder and the package's imports (~0.3 GB)
Probed = dict[int, ProbeResult | Reject]


def probe_in_main(config: BuildConfig, videos: int) -> bool:
    """Whether `videos` videos are probed in the main process: run.probe_workers=1, or auto and fewer than
    PARALLEL_FROM of them."""
    chosen = parse_workers(config.run.probe_workers, "run.probe_workers", least=1)
    return videos <= 1 or (videos < PARALLEL_FROM if chosen is None else chosen == 1)


def probe_workers(config: BuildConfig, videos: int) -> int:
    """How many processes probe `videos` videos: 1 where probe_in_main, else run.probe_workers, or one per core
    (at most 16) under auto."""
    if probe_in_main(config, videos):
        return 1
    chosen = parse_workers(config.run.probe_workers, "run.probe_workers", least=1)
    return min(chosen or min(_MOST, os.cpu_count() or 1), videos)


def by_video(samples: list[Sample]) -> list[list[Sample]]:
    """The samples of each video together, so each video is decoded once: the share of one process or task."""
    groups: dict[str, list[Sample]] = {}
    for sample in samples:
        groups.setdefault(sample.entry.video, []).append(sample)
    return list(groups.values())


def in_plan_order(samples: list[Sample], probes: Probed) -> Probed:
    """`probes` in the order of `samples`, as the probe in the main process gives them, whichever share finished
    first."""
    return {sample.source_index: probes[sample.source_index] for sample in samples}


def probe_plan(samples: list[Sample], config: BuildConfig, advance: Advance = uncounted) -> Probed:
    """{source_index: probe result or reject} of every planned sample, in `probe_workers` processes; in the order of
    `samples`."""
    groups = by_video(samples)
    workers = probe_workers(config, len(groups))
    if workers == 1:
        return probe_all(samples, config, advance)
    probes: Probed = {}
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=context, initializer=child_process_setup) as pool:
        pending = {pool.submit(probe_samples, group, config): len(group) for group in groups}
        for done in as_completed(pending):
            probes.update(done.result())
            advance(pending[done])
    return in_plan_order(samples, probes)
