"""`latentforge build`: plan -> probe -> units (decode, tokenize, text, stage) -> commit -> verify.

The library function behind the CLI verb. Config errors surface in load_config, before this runs; bad samples
become rejects; the output depends only on inputs, config, software and device model, never on how many
processes ran it or how often it was interrupted (docs/execution.md).
"""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import registry
from ..cache.layout import LOCK, RUN_RECORDS_DIR
from ..cache.ownership import RootLayout
from ..config import BuildConfig
from ..errors import ConfigError, InputNotice, StopRequested, storage_error
from ..executor.base import Executor
from ..executor.metrics import MetricsServer
from ..executor.process_setup import stop_on_signals
from ..pipeline.captions import caption_probes, captions_todo
from ..pipeline.dedup import dedup_probes, dedup_todo
from ..pipeline.plan import plan_fingerprint, plan_samples, write_plan
from ..pipeline.probe import vfr_notice
from ..pipeline.run_record import set_aside_damaged_record
from ..staging.remote_staging import claim_staging, staged_units
from ..testing.fault_points import arm_main_process
from .bucket_run import build_buckets
from .encode_commit import encode_and_commit, remove_tmp_leftovers
from .extend import plan_extension, refuse_plain_rerun, unit_numbers
from .lock import BuildLock
from .parallel_analysis import analyser
from .placement import executor_for
from .preflight import preflight
from .probe_record import probe_remembered
from .progress import BuildProgress
from .records_dir import build_records_dir, records_in_root
from .remote_root import check_remote_cache
from .resume import check_config, check_existing_cache, check_inputs, resume_key
from .run_stats import RunStats
from .unknown_tokens import unknown_token_notice


@dataclass
class BuildResult:
    root: Path | str  # output.root; a URL (webdataset sink) stays as given
    num_samples: int
    rejects_by_reason: dict[str, int]
    seconds: float
    stats: dict[str, Any] = field(default_factory=dict)
    stats_path: Path | None = None  # ROOT/build/stats-<utc>.json: timings, throughput, settings of this run
    added_ids: list[str] = field(default_factory=list)  # --extend: ids this run added to the plan
    removed_ids: list[str] = field(default_factory=list)  # --extend: ids no longer in the input, rows kept


def _clear_records(build_dir: Path) -> None:
    """--overwrite with a sink whose records live apart from the root: start them over, all but the lock file
    (the commit then replaces every object under the root)."""
    for item in build_dir.iterdir():
        if item.name != LOCK:
            shutil.rmtree(item) if item.is_dir() and not item.is_symlink() else item.unlink()


def _clear_root(root: Path, layout: RootLayout | None) -> None:
    """--overwrite, under the lock: remove what the sink's layout names (the pre-flight found nothing else there; a
    sink without a layout: everything), all but the lock file itself (a second build waits on it)."""
    for child in root.iterdir():
        if child.name == RUN_RECORDS_DIR and child.is_dir():
            for item in child.iterdir():
                if item.name != LOCK:
                    shutil.rmtree(item) if item.is_dir() and not item.is_symlink() else item.unlink()
        elif layout is None or not layout.foreign([child.name]):
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()


def _refuse_extend(config: BuildConfig, overwrite: bool) -> None:
    """--extend grows a cache, keeping its rows' bytes: refused with --overwrite and where the sink cannot (its
    extend_refusal)."""
    if overwrite:
        raise ConfigError("--extend keeps the cache's rows and adds new ones, --overwrite starts the cache over; "
                          "give one of the two")
    if (refusal := registry.resolve("sink", config.output.sink).extend_refusal(config.output)) is not None:
        raise ConfigError(refusal)


def build(config: BuildConfig, overwrite: bool = False, quiet: bool = False, extend: bool = False,
          recheck: bool = False) -> BuildResult:
    """Build (or resume) the cache at config.output.root. Raises StopRequested on SIGTERM/SIGINT.
    `extend`: add the samples the input gained to the cache built there (docs/extend.md). `recheck`: trust no
    record of an earlier run by sizes and mtimes: probe every source again, and verify a committed cache by reading
    it whole before calling it done (builder/probe_record.py, builder/committed.py)."""
    root = Path(config.output.root)
    if extend:
        _refuse_extend(config, overwrite)
    in_root = records_in_root(config)
    build_dir = build_records_dir(config)
    arm_main_process()
    started = time.perf_counter()
    executor = executor_for(config, build_dir, quiet)
    preflight(config, executor)
    stats = RunStats(settings=executor.settings())
    stats.main_seconds["preflight"] = time.perf_counter() - started  # models loaded and checked: a slow start shows
    on_main_thread = threading.current_thread() is threading.main_thread()
    guard = stop_on_signals() if on_main_thread else contextlib.nullcontext()
    try:
        with guard, BuildLock(build_dir), _serve_metrics(config, stats):
            try:
                if extend:
                    result = _extend_locked(config, executor, root, BuildProgress(quiet), stats, recheck)
                else:
                    result = _build_locked(config, executor, root, overwrite, BuildProgress(quiet), stats, recheck)
            except StopRequested:
                stats.outcome = "interrupted"
                raise
            except BaseException:
                stats.outcome = "failed"
                raise
            finally:
                with contextlib.suppress(OSError):
                    stats.write(build_dir)
        result.stats_path = build_dir / stats.path_name
        notice = unknown_token_notice(stats.unknown_tokens, config.text)
        if notice is not None:
            warnings.warn(notice, InputNotice, stacklevel=2)
        if not in_root:
            result.root = config.output.root  # Path() would fold "s3://b/x" into "s3:/b/x"
        return result
    except (OSError, RuntimeError) as error:
        typed = storage_error(error)
        if typed is None:
            raise
        raise typed from error


def _serve_metrics(config: BuildConfig, stats: RunStats) -> contextlib.AbstractContextManager:
    """The main process's Prometheus endpoint on run.metrics_port while the build holds its lock."""
    if not config.run.metrics_port:
        return contextlib.nullcontext()
    return contextlib.closing(MetricsServer(config.run.metrics_host, config.run.metrics_port, stats.metrics,
                                            "the build's main process"))


def _build_locked(config: BuildConfig, executor: Executor, root: Path, overwrite: bool, progress: BuildProgress,
                  stats: RunStats, recheck: bool) -> BuildResult:
    build_dir = executor.build_dir
    in_root = records_in_root(config)
    if overwrite and in_root:
        _clear_root(root, registry.resolve("sink", config.output.sink).root_layout)
    elif overwrite:
        _clear_records(build_dir)
    remove_tmp_leftovers(build_dir)
    set_aside_damaged_record(build_dir)
    key = resume_key(config)
    if in_root:
        check_existing_cache(root, config, key, build_dir)
    elif not overwrite:  # its records are node-local: compare with the cache at the root itself
        check_remote_cache(config, key)
    check_config(build_dir, key)
    claim_staging(config.output, key, overwrite)
    refuse_plain_rerun(build_dir)
    started = time.perf_counter()
    samples, plan_rejects = plan_samples(config, _analyser(config, build_dir, progress))
    check_inputs(build_dir, key, plan_fingerprint(samples))
    write_plan(build_dir, samples, plan_rejects)
    with progress.task("probe", len(samples)) as advance:
        probes = probe_remembered(samples, build_dir, key, executor.run_probe, advance, recheck)
    _note_vfr(samples, probes)
    stats.main_seconds["probe"] = time.perf_counter() - started
    probes = _curated(config, executor, samples, probes, progress, stats, extending=False)
    stats.samples_planned = len(samples)
    if config.frames.buckets:
        bucketed = build_buckets(config, root, samples, plan_rejects, probes, progress, stats)
        num_samples, rejects = bucketed.num_samples, bucketed.rejects_by_reason
    else:
        committed = encode_and_commit(config, executor, samples, plan_rejects, probes, progress, stats,
                                      recheck=recheck)
        num_samples, rejects = committed.num_samples, committed.rejects_by_reason
    stats.rejects_by_reason = dict(rejects)
    stats.outcome = "complete"
    return BuildResult(root, num_samples, rejects, time.time() - stats.started_unix, stats.summary())


def _note_vfr(samples: list, probes: dict) -> None:
    notice = vfr_notice(samples, probes)
    if notice is not None:
        warnings.warn(notice, InputNotice, stacklevel=3)


def _curated(config: BuildConfig, executor: Executor, samples, probes, progress: BuildProgress, stats: RunStats,
             extending: bool):
    """Near duplicates dropped, then missing captions written; the seconds of each pass that ran in the run's stats."""
    started = time.perf_counter()
    probes = _deduplicated(config, executor, samples, probes, progress, extending)
    if config.dedup.enabled:
        stats.main_seconds["dedup"] = time.perf_counter() - started
    started = time.perf_counter()
    probes = _captioned(config, executor, samples, probes, progress)
    if config.captions.mode != "keep":
        stats.main_seconds["captions"] = time.perf_counter() - started
    return probes


def _deduplicated(config: BuildConfig, executor: Executor, samples, probes, progress: BuildProgress, extending: bool):
    """dedup.enabled: near-duplicate windows rejected (pipeline/dedup.py) before they are captioned or encoded, the
    missing embeddings computed where the executor runs the build's models; recorded embeddings read back."""
    count = dedup_todo(samples, probes, config)
    if not count:
        return probes
    with progress.task("dedup", count) as advance:
        return dedup_probes(samples, probes, config, executor.build_dir, executor.run_device_work, extending, advance)


def _captioned(config: BuildConfig, executor: Executor, samples, probes, progress: BuildProgress):
    """captions.mode=generate_*: the probed windows' captions (pipeline/captions.py) before any unit, the missing ones
    generated where the executor runs the build's models; recorded ones read back."""
    count = captions_todo(samples, probes, config)
    if not count:
        return probes
    with progress.task("captions", count) as advance:
        return caption_probes(samples, probes, config, executor.build_dir, executor.main_device(),
                              executor.run_device_work, advance)


def _analyser(config: BuildConfig, build_dir: Path, progress: BuildProgress):
    """segments: the videos' analyses, recorded under build/analysis/ and reused by reruns, resumes and --extend."""
    return analyser(config, build_dir, lambda videos: progress.task("shots", videos))


def _extend_locked(config: BuildConfig, executor: Executor, root: Path, progress: BuildProgress,
                   stats: RunStats, recheck: bool) -> BuildResult:
    """Merge the input into the recorded plan, encode the units not staged yet, commit all staged units (a bucketed
    root: each bucket that gains members grows as a single-shape cache does, then the root commits again)."""
    build_dir = executor.build_dir
    remove_tmp_leftovers(build_dir)
    key = resume_key(config)
    if records_in_root(config):
        check_existing_cache(root, config, key, build_dir)
    else:  # its records are node-local: compare with the cache at the root itself
        check_remote_cache(config, key)
    check_config(build_dir, key, may_differ=("config.dataset.path",))
    claim_staging(config.output, key, overwrite=False)
    started = time.perf_counter()
    listing, plan_rejects = plan_samples(config, _analyser(config, build_dir, progress))
    extension = plan_extension(build_dir, key, listing, plan_rejects)
    unit_of = unit_numbers(extension.samples, config.output.unit_size, extension.segment_starts)
    done = staged_units(build_dir, config.output.staging_url, set(unit_of.values()))
    # a bucketed root stages nothing itself: every sample's probe, the old ones' as recorded, says its bucket
    todo = [s for s in extension.samples if config.frames.buckets or unit_of[s.source_index] not in done]
    with progress.task("probe", len(todo)) as advance:
        probes = probe_remembered(todo, build_dir, key, executor.run_probe, advance, recheck,
                                  kept=set(extension.removed))
    _note_vfr(todo, probes)
    stats.main_seconds["probe"] = time.perf_counter() - started
    probes = _curated(config, executor, todo, probes, progress, stats, extending=not config.frames.buckets)
    stats.samples_planned = len(extension.samples)
    staged = len(extension.samples) - len(todo)
    if config.frames.buckets:
        bucketed = build_buckets(config, root, extension.samples, plan_rejects, probes, progress, stats,
                                 tuple(extension.segment_starts))
        num_samples, rejects = bucketed.num_samples, bucketed.rejects_by_reason
    else:
        committed = encode_and_commit(config, executor, todo, plan_rejects, probes, progress, stats,
                                      earlier_rejects=([], staged), unit_of=unit_of, recheck=recheck)
        num_samples, rejects = committed.num_samples, committed.rejects_by_reason
    stats.rejects_by_reason = dict(rejects)
    stats.outcome = "complete"
    return BuildResult(root, num_samples, rejects, time.time() - stats.started_unix, stats.summary(),
                       added_ids=extension.added, removed_ids=extension.removed)
