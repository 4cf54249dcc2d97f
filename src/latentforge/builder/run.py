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
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cache.config_file import CacheConfig
from ..cache.layout import CACHE_CONFIG, LOCK, RUN_RECORDS_DIR, STAGING_DIR, TMP_LEFTOVER
from ..cache.model_record import ModelRecord, read_model_record
from ..cache.rows import read_rejects
from ..config import BuildConfig
from ..errors import LatentforgeError, StopRequested, storage_error
from ..executor.base import Executor, executor_for
from ..executor.events import RankEvent, UnitStaged
from ..executor.process_setup import stop_on_signals
from ..executor.rank_stats import RankStats
from ..faults import arm_main_process
from ..pipeline.models import load_models, model_record
from ..pipeline.plan import plan_fingerprint, plan_samples, write_plan
from ..pipeline.probe import probe_all
from ..pipeline.unit import Unit, cut_units
from ..records import Reject
from ..writers.commit import CommitResult, commit_cache
from ..writers.staging import completed_units, read_staged_rejects
from .estimate import check_free_disk, estimate_output_bytes, output_shapes
from .lock import BuildLock
from .preflight import preflight
from .progress import BuildProgress
from .reject_limit import reject_problem
from .resume import check_config, check_existing_cache, check_inputs, resume_key
from .run_stats import RunStats


@dataclass
class BuildResult:
    root: Path
    num_samples: int
    rejects_by_reason: dict[str, int]
    seconds: float
    stats: dict[str, Any] = field(default_factory=dict)
    stats_path: Path | None = None  # ROOT/build/stats-<utc>.json: timings, throughput, settings of this run


def _clear_root(root: Path) -> None:
    """--overwrite, under the lock: remove everything but the lock file itself (a second build waits on it)."""
    for child in root.iterdir():
        if child.name == RUN_RECORDS_DIR and child.is_dir():
            for item in child.iterdir():
                if item.name != LOCK:
                    shutil.rmtree(item) if item.is_dir() and not item.is_symlink() else item.unlink()
        elif child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def _remove_tmp_leftovers(build_dir: Path) -> None:
    """tmp siblings of writes a killed run never finished; only safe while holding the lock."""
    for folder in (build_dir, build_dir / STAGING_DIR):
        if folder.is_dir():
            for item in folder.iterdir():
                if TMP_LEFTOVER.match(item.name) and item.is_file():
                    item.unlink()


def build(config: BuildConfig, overwrite: bool = False, quiet: bool = False) -> BuildResult:
    """Build (or resume) the cache at config.output.root. Raises StopRequested on SIGTERM/SIGINT."""
    root = Path(config.output.root)
    if overwrite and root.exists() and any(root.iterdir()):
        if not ((root / RUN_RECORDS_DIR).is_dir() or (root / CACHE_CONFIG).exists()):
            raise LatentforgeError(f"--overwrite refused: {root} is not empty and is not a latentforge cache")
    build_dir = root / RUN_RECORDS_DIR
    arm_main_process()
    executor = executor_for(config, build_dir, quiet)
    preflight(config, executor)
    stats = RunStats(settings=executor.settings())
    on_main_thread = threading.current_thread() is threading.main_thread()
    guard = stop_on_signals() if on_main_thread else contextlib.nullcontext()
    try:
        with guard, BuildLock(build_dir):
            try:
                result = _build_locked(config, executor, root, overwrite, BuildProgress(quiet), stats)
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
        return result
    except (OSError, RuntimeError) as error:
        typed = storage_error(error)
        if typed is None:
            raise
        raise typed from error


def _build_locked(config: BuildConfig, executor: Executor, root: Path, overwrite: bool, progress: BuildProgress,
                  stats: RunStats) -> BuildResult:
    build_dir = executor.build_dir
    if overwrite:
        _clear_root(root)
    _remove_tmp_leftovers(build_dir)
    key = resume_key(config)
    check_existing_cache(root, config, key)
    check_config(build_dir, key)
    started = time.perf_counter()
    samples, plan_rejects = plan_samples(config)
    check_inputs(build_dir, key, plan_fingerprint(samples))
    write_plan(build_dir, samples, plan_rejects)
    with progress.task("probe", len(samples)) as advance:
        probes = probe_all(samples, config, advance)
    stats.main_seconds["probe"] = time.perf_counter() - started
    stats.samples_planned = len(samples)
    probe_rejects = [p for p in probes.values() if isinstance(p, Reject)]
    candidates = len(samples) + len(plan_rejects)
    _check_rejects(candidates, plan_rejects + probe_rejects, config, "by the plan and the probe")
    total_shape, text_shape = output_shapes(config)
    needed = estimate_output_bytes(len(samples) - len(probe_rejects), total_shape, text_shape,
                                   config.output.storage_dtype, rows_per_shard=config.output.rows_per_shard)
    check_free_disk(root, needed, config.output.min_free_bytes)

    units = cut_units(samples, probes, config.output.unit_size)
    done = completed_units(build_dir)
    todo: list[Unit] = [u for u in units if u.index not in done]
    stats.samples_todo = sum(len(u.samples) for u in todo)
    if todo:
        with progress.task("encode", len(samples), completed=len(samples) - stats.samples_todo) as advance:
            def on_event(event: RankEvent) -> None:
                if event.stats:
                    stats.ranks[event.rank] = RankStats(**event.stats)
                if isinstance(event, UnitStaged):
                    advance(event.samples)

            executor.run(todo, on_event)

    staged_rejects = [r for path in completed_units(build_dir).values() for r in read_staged_rejects(path)]
    _check_rejects(candidates, plan_rejects + staged_rejects, config, "in all")
    started = time.perf_counter()
    result = _commit(config, root, build_dir, total_shape, plan_rejects, executor.main_device())
    stats.main_seconds["commit"] = time.perf_counter() - started
    rejects = Counter(r.reason for r in read_rejects(root))
    stats.rejects_by_reason = dict(rejects)
    stats.outcome = "complete"
    return BuildResult(root, result.num_samples, dict(sorted(rejects.items())),
                       time.time() - stats.started_unix, stats.summary())


def _check_rejects(candidates: int, rejects: list[Reject], config: BuildConfig, when: str) -> None:
    problem = reject_problem(candidates, rejects, config.run.max_reject_fraction, when)
    if problem is not None:
        raise LatentforgeError(problem)


def _commit(config: BuildConfig, root: Path, build_dir: Path, total_shape: tuple[int, ...],
            plan_rejects: list[Reject], device: str) -> CommitResult:
    """Every unit is staged: shards, manifest, SHA256SUMS, verify, marker. Fingerprints and the empty prompt
    come from the record the first rank wrote (cache/model_record.py); only without one do the models load
    here, on the executor's main device, so the result is the same for any split."""
    record: ModelRecord | None = read_model_record(build_dir)
    if record is None:  # staged by a build that left no record: load the models for their fingerprints
        tokenizer, text_encoder = load_models(config, device)
        record = model_record(config, tokenizer, text_encoder, device)
    text = record.text
    empty_prompt = None
    if text is not None and text.empty_prompt is not None:
        empty_prompt = (text.empty_prompt.embeddings.astype(config.output.storage_dtype), text.empty_prompt.lengths)
    cache_config = CacheConfig.for_build(config, total_shape, record.tokenizer_fingerprint, text,
                                         record.latent_channels)
    unit_paths = [path for _, path in sorted(completed_units(build_dir).items())]
    readme_context = {"text_note": text.provenance_note if text is not None else None}
    return commit_cache(root, unit_paths, plan_rejects, cache_config, empty_prompt, readme_context)
