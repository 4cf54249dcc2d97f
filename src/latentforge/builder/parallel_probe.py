"""The probe of a whole plan spread over processes: each video is decoded once from its start (decode/stream_probe.py),
which costs about a second of CPU per 10 s of 720p, so a large input is probed by every core of the host before any
GPU work starts, the windows of one video in one process. Small inputs are probed in the main process, where
starting processes would cost more than it saves. The results are those of pipeline.probe.probe_all, whatever the
split."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, as_completed

from ..config import BuildConfig
from ..config.checks import parse_workers
from ..executor.process_setup import child_process_setup
from ..pipeline.probe import ProbeResult, probe_all, probe_samples
from ..progress import Advance, uncounted
from ..records import Reject, Sample

PARALLEL_FROM = 32  # distinct videos from which the probe starts processes of its own (each imports the package)
_MOST = 16  # processes under auto: each holds a decoder and the package's imports (~0.3 GB)


def probe_workers(config: BuildConfig, videos: int) -> int:
    """How many processes probe `videos` videos: run.probe_workers, else one per core (at most 16) once there are
    PARALLEL_FROM of them."""
    chosen = parse_workers(config.run.probe_workers, "run.probe_workers", least=1)
    if chosen is None:
        chosen = min(_MOST, os.cpu_count() or 1) if videos >= PARALLEL_FROM else 1
    return max(1, min(chosen, videos))


def probe_plan(samples: list[Sample], config: BuildConfig, advance: Advance = uncounted
               ) -> dict[int, ProbeResult | Reject]:
    """{source_index: probe result or reject} of every planned sample, in `probe_workers` processes; in the order of
    `samples`, as the probe in the main process gives it, whichever process finished first."""
    by_video: dict[str, list[Sample]] = {}
    for sample in samples:
        by_video.setdefault(sample.entry.video, []).append(sample)
    workers = probe_workers(config, len(by_video))
    if workers == 1:
        return probe_all(samples, config, advance)
    probes: dict[int, ProbeResult | Reject] = {}
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=context, initializer=child_process_setup) as pool:
        pending = {pool.submit(probe_samples, group, config): len(group) for group in by_video.values()}
        for done in as_completed(pending):
            probes.update(done.result())
            advance(pending[done])
    return {sample.source_index: probes[sample.source_index] for sample in samples}
