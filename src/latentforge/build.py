"""`latentforge build`: plan -> probe -> units (decode, tokenize, text, stage) -> commit -> verify.

The library function behind the CLI verb. Config errors surface in load_config/validate, before this runs;
bad samples become rejects; the output depends only on inputs, config, software and device model, never on
how many processes ran it or how often it was interrupted (docs/execution.md).
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from . import registry
from .cache_config import make_cache_config
from .commit import CacheLayout, commit_cache
from .config import BuildConfig, window_step
from .decode.pyav import probe_video
from .errors import LatentforgeError, SampleRejected
from .estimate import check_free_disk, estimate_output_bytes
from .executor.env_errors import as_os_error, environment_message
from .executor.local import resolve_slots, run_local
from .executor.process_setup import StopRequested, stop_on_signals
from .executor.rank import load_models
from .executor.unit import Unit, cut_units
from .faults import arm_main_process
from .io import read_jsonl
from .lock import BuildLock
from .model_record import read_model_record
from .plan import make_plan, plan_fingerprint, write_plan
from .probe import ProbeResult, probe_sample
from .progress import BuildProgress
from .records import Reject, Sample, SourceEntry
from .resume import check_config, check_inputs, resume_key
from .text.source import build_text_record
from .stats import RunStats
from .transforms.window import window_starts
from .writers.staging import STAGING_DIR, completed_units

_TMP_LEFTOVER = re.compile(r"^\..+\.tmp\d+$")  # io.atomic_path's names


@dataclass
class BuildResult:
    root: Path
    num_samples: int
    rejects_by_reason: dict[str, int]
    seconds: float
    stats: dict[str, Any] = field(default_factory=dict)


def _text_dim_hint(config: BuildConfig) -> int:
    """Embedding width from the text model's config.json, for the disk estimate (4096 when unknown)."""
    path = Path(config.text.path or "") / "config.json"
    if path.is_file():
        return int(json.loads(path.read_text(encoding="utf-8")).get("d_model", 4096))
    return 4096


def _starts_for(config: BuildConfig):
    if window_step(config.frames) is None:
        return None

    def starts(entry: SourceEntry) -> list[int] | None:
        try:
            info = probe_video(entry.video, entry.key)
        except SampleRejected:
            return None
        step = window_step(config.frames)
        valid = window_starts(info, config.frames)
        return [s for s in valid if s % step == 0] or None

    return starts


def _clear_root(root: Path) -> None:
    """--overwrite, under the lock: remove everything but the lock file itself (a second build waits on it)."""
    for child in root.iterdir():
        if child.name == "build" and child.is_dir():
            for item in child.iterdir():
                if item.name != "lock":
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
                if _TMP_LEFTOVER.match(item.name) and item.is_file():
                    item.unlink()


def plan_samples(config: BuildConfig) -> tuple[list[Sample], list[Reject]]:
    entries = registry.resolve("reader", config.dataset.reader)(config.dataset).entries()
    return make_plan(entries, _starts_for(config), config.dataset.limit)


def probe_all(samples: list[Sample], config: BuildConfig, progress: BuildProgress) -> dict[int, ProbeResult | Reject]:
    probes: dict[int, ProbeResult | Reject] = {}
    with progress.task("probe", len(samples)) as advance:
        for sample in samples:
            try:
                probes[sample.source_index] = probe_sample(sample, config)
            except SampleRejected as error:
                probes[sample.source_index] = Reject(
                    sample.sample_id, sample.source_index, error.reason, error.detail, "probe")
            advance(1)
    return probes


def check_reject_fraction(samples: list[Sample], rejects: list[Reject], limit: float) -> None:
    if samples and len(rejects) / len(samples) > limit:
        reasons = Counter(r.reason for r in rejects)
        raise LatentforgeError(
            f"{len(rejects)} of {len(samples)} samples rejected by the probe, more than "
            f"run.max_reject_fraction={limit}; reasons: "
            + ", ".join(f"{reason} {count}" for reason, count in reasons.most_common())
            + "; see the probe's reasons with `latentforge scan`, fix the inputs or raise the limit")


def output_shapes(config: BuildConfig) -> tuple[tuple[int, ...], tuple[int, int] | None]:
    """One row's latent [C_total, T', H', W'] and text [max_length, D] (None without text)."""
    tokenizer_cls = registry.resolve("tokenizer", config.tokenizer.name)
    latent = tokenizer_cls.latent_shape(config.frames.num_frames, config.frames.height, config.frames.width)
    total = (latent[0] * len(config.modalities.names), *latent[1:])
    text = None if config.text.name == "none" else (config.text.max_length, _text_dim_hint(config))
    return total, text


def build(config: BuildConfig, overwrite: bool = False, quiet: bool = False) -> BuildResult:
    """Build (or resume) the cache at config.output.root. Raises StopRequested on SIGTERM/SIGINT."""
    root = Path(config.output.root)
    if overwrite and root.exists() and any(root.iterdir()):
        if not ((root / "build").is_dir() or (root / "cache_config.json").exists()):
            raise LatentforgeError(f"--overwrite refused: {root} is not empty and is not a latentforge cache")
    build_dir = root / "build"
    arm_main_process()
    stats = RunStats(settings=_execution_settings(config))
    guard = stop_on_signals() if _on_main_thread() else contextlib.nullcontext()
    try:
        with guard, BuildLock(build_dir):
            try:
                result = _build_locked(config, root, build_dir, overwrite, BuildProgress(quiet), stats)
            except StopRequested:
                stats.outcome = "interrupted"
                raise
            except BaseException:
                stats.outcome = "failed"
                raise
            finally:
                with contextlib.suppress(OSError):
                    stats.write(build_dir)
        return result
    except (OSError, RuntimeError) as error:
        cause = as_os_error(error)
        message = environment_message(cause) if cause is not None else None
        if message is None:
            raise
        raise LatentforgeError(message) from error


def _execution_settings(config: BuildConfig) -> dict[str, Any]:
    if config.run.executor == "ray":
        return {"executor": "ray", "ray_address": config.run.ray_address, "device": config.run.device,
                "workers_per_gpu": config.run.workers_per_gpu}
    return {"slots": list(resolve_slots(config).devices), "workers_per_gpu": config.run.workers_per_gpu}


def _run_units(config: BuildConfig, build_dir: Path, todo: list[Unit], on_staged, stats: RunStats,
               quiet: bool) -> None:
    if config.run.executor == "ray":
        from .executor.ray_executor import run_ray  # Ray is an optional extra, imported only when used

        run_ray(config, build_dir, todo, on_staged, stats.ranks, quiet)
    else:
        run_local(config, build_dir, todo, on_staged, stats.ranks)


def _commit_device(config: BuildConfig) -> str:
    if config.run.executor == "ray":
        from .executor.ray_executor import commit_device

        return commit_device(config)
    return resolve_slots(config).devices[0]


def _on_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _build_locked(config: BuildConfig, root: Path, build_dir: Path, overwrite: bool, progress: BuildProgress,
                  stats: RunStats) -> BuildResult:
    if overwrite:
        _clear_root(root)
    _remove_tmp_leftovers(build_dir)
    key = resume_key(config)
    check_config(build_dir, key)
    started = time.perf_counter()
    samples, plan_rejects = plan_samples(config)
    check_inputs(build_dir, key, plan_fingerprint(samples))
    write_plan(build_dir, samples, plan_rejects)
    probes = probe_all(samples, config, progress)
    stats.main_seconds["probe"] = time.perf_counter() - started
    stats.samples_planned = len(samples)
    probe_rejects = [p for p in probes.values() if isinstance(p, Reject)]
    check_reject_fraction(samples, probe_rejects, config.run.max_reject_fraction)
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
            _run_units(config, build_dir, todo, lambda unit, n: advance(n), stats, progress.quiet)

    started = time.perf_counter()
    result = _commit(config, root, build_dir, total_shape, plan_rejects, _commit_device(config))
    stats.main_seconds["commit"] = time.perf_counter() - started
    rejects = Counter(row["reason"] for row in read_jsonl(root / "rejects.jsonl"))
    stats.rejects_by_reason = dict(rejects)
    stats.outcome = "complete"
    return BuildResult(root, result.num_samples, dict(sorted(rejects.items())),
                       time.time() - stats.started_unix, stats.summary())


def _commit(config: BuildConfig, root: Path, build_dir: Path, total_shape: tuple[int, ...],
            plan_rejects: list[Reject], device: str):
    """Every unit is staged: shards, manifest, SHA256SUMS, verify, marker. Fingerprints and the empty prompt
    come from the record the first rank wrote (model_record.py); only without one do the models load here, on
    the first slot's device, so the result is the same for any split."""
    recorded = read_model_record(build_dir)
    if recorded is not None:
        tokenizer_fingerprint, latent_channels, text = recorded
    else:  # staged by a build that left no record: load the models for their fingerprints and empty prompt
        tokenizer, text_encoder = load_models(config, torch.device(device))
        text = build_text_record(config, text_encoder, torch.device(device))
        tokenizer_fingerprint, latent_channels = tokenizer.fingerprint(), type(tokenizer).latent_channels
    empty_prompt = None
    if text is not None and text.empty_prompt is not None:
        empty_prompt = (text.empty_prompt.embeddings.astype(config.output.storage_dtype), text.empty_prompt.lengths)
    cache_config = make_cache_config(config, total_shape, tokenizer_fingerprint, text, latent_channels)
    layout = CacheLayout(
        latent_dataset=config.output.latent_dataset,
        latent_shape=total_shape,
        storage_dtype=config.output.storage_dtype,
        rows_per_shard=config.output.rows_per_shard,
        text_prefix=text.prefix if text is not None else None,
        text_dim=text.dim if text is not None else None,
        max_length=config.text.max_length,
    )
    unit_paths = [path for _, path in sorted(completed_units(build_dir).items())]
    readme_context = {"text_note": text.provenance_note if text is not None else None}
    return commit_cache(root, layout, unit_paths, plan_rejects, cache_config, empty_prompt, readme_context)
