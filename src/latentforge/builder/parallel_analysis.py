"""The analysis pass of a plan with segments spread over processes (docs/long-videos.md): each video decoded once at
low resolution for its shots and quality measures, in as many processes as the probe would use
(run.probe_workers), each recorded under build/analysis/ as it finishes, so a rerun, a resume or an --extend decodes
only the videos it has no record for. The results do not depend on the split."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from ..config import BuildConfig
from ..executor.parallel_probe import probe_workers
from ..executor.process_setup import child_process_setup
from ..pipeline.analysis_records import Analyser, Analyses, analyse_recorded, analysis_settings, recorded_analysis
from ..progress import Advance, uncounted
from ..records import SourceEntry


def analyser(config: BuildConfig, build_dir: Path, advance_for=None) -> Analyser:
    """The builder's Analyser: recorded analyses reused, the rest analysed in `probe_workers` processes.
    advance_for(total) -> a context manager yielding advance(n), for a progress bar (None: uncounted)."""
    settings = analysis_settings(config)

    def analyse(entries: list[SourceEntry]) -> Analyses:
        videos: dict[str, str] = {}
        for entry in entries:
            videos.setdefault(entry.video, entry.key)
        found: Analyses = {}
        todo = []
        for video, key in videos.items():
            recorded = recorded_analysis(build_dir, video, settings)
            if recorded is not None:
                found[video] = recorded
            else:
                todo.append((video, key))
        if not todo:
            return found
        if advance_for is None:
            found.update(_analyse(todo, config, build_dir, uncounted))
        else:
            with advance_for(len(todo)) as advance:
                found.update(_analyse(todo, config, build_dir, advance))
        return found

    return analyse


def _analyse(todo: list[tuple[str, str]], config: BuildConfig, build_dir: Path, advance: Advance) -> Analyses:
    settings = analysis_settings(config)
    workers = probe_workers(config, len(todo))
    found: Analyses = {}
    if workers == 1:
        for video, key in todo:
            found[video] = analyse_recorded(video, key, settings, build_dir)
            advance(1)
        return found
    context = multiprocessing.get_context("spawn")
    threads = 1 if settings.detect == "transnetv2" else None
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_worker_setup, initargs=(threads,)) as pool:
        pending = {pool.submit(analyse_recorded, video, key, settings, build_dir): video for video, key in todo}
        for done in as_completed(pending):
            found[pending[done]] = done.result()
            advance(1)
    return found


def _worker_setup(torch_threads: int | None) -> None:
    """A worker of the pass: the build's child setup; with TransNetV2, torch on `torch_threads` threads (the workers
    are the parallelism; torch's own threads in each would oversubscribe the cores)."""
    child_process_setup()
    if torch_threads is not None:
        import torch

        torch.set_num_threads(torch_threads)
