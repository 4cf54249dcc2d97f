"""Encode a planned and probed cache and commit it: the part of a build after the probe, shared by a
single-shape build and each bucket of a bucketed one."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from .. import registry
from ..cache.build_records import cache_config_for_build
from ..cache.curation import curation_sections
from ..cache.layout import STAGING_DIR, TMP_LEFTOVER
from ..cache.model_record import ModelRecord, read_model_record, write_model_record
from ..config import BuildConfig
from ..errors import LatentforgeError
from ..executor.base import Executor
from ..executor.events import RankEvent, UnitStaged
from ..executor.rank_stats import RankStats
from ..pipeline.audio_window import audio_section
from ..pipeline.conditioning import ConditioningStage
from ..pipeline.kernel_plan_pass import plan_request
from ..pipeline.kernel_plans import recorded_books, set_aside_damaged_books
from ..pipeline.models import load_models, model_record
from ..pipeline.probe import ProbeResult
from ..pipeline.run_record import read_run_record
from ..pipeline.side_streams import side_stream_records
from ..pipeline.unit_inputs import Unit, cut_units
from ..records import Reject, Sample
from ..sinks.base import SinkCommit, StagedCache
from ..staging.remote_staging import staged_units
from ..staging.staged_units import completed_units, read_staged_rejects
from .committed import committed_before, record_commit
from .estimate import check_free_disk, conditioning_values, estimate_output_bytes, output_shapes, side_values
from .extend import planned_units
from .progress import BuildProgress
from .reject_limit import reject_problem
from .resume import check_environment
from .run_stats import RunStats


def remove_tmp_leftovers(build_dir: Path) -> None:
    """tmp siblings of writes a killed run never finished; only safe while holding the lock."""
    for folder in (build_dir, build_dir / STAGING_DIR):
        if folder.is_dir():
            for item in folder.iterdir():
                if TMP_LEFTOVER.match(item.name) and item.is_file():
                    item.unlink()


def encode_and_commit(config: BuildConfig, executor: Executor, samples: list[Sample], plan_rejects: list[Reject],
                      probes: dict[int, ProbeResult | Reject], progress: BuildProgress, stats: RunStats,
                      earlier_rejects: tuple[list[Reject], int] = ([], 0),
                      unit_of: dict[int, int] | None = None, allow_empty: bool = False,
                      recheck: bool = False, publish: bool = True) -> SinkCommit:
    """Encode the probed samples that are not staged yet and commit the cache at config.output.root with the
    configured sink (output.sink).
    `earlier_rejects`: rejects (and their candidates) found before this cache's plan, counted against
    run.max_reject_fraction with this cache's own. `unit_of`: an extended plan's unit numbering
    (builder/extend.py); the commit takes every staged unit, also those of samples not passed here, and fails
    unless they cover the whole plan. `allow_empty`: a cache of no sample may be committed (one bucket's).
    `recheck`: a cache committed from this plan before is verified whole, not trusted by its files' sizes and
    mtimes (builder/committed.py). `publish`: False leaves a new commit in ROOT/build/next, unrecorded, for its
    bucketed root's commit to move in; record_commit follows once it is in (a bucket an --extend grows)."""
    build_dir = executor.build_dir
    earlier, earlier_candidates = earlier_rejects
    probe_rejects = [p for p in probes.values() if isinstance(p, Reject)]
    candidates = len(samples) + len(plan_rejects) + earlier_candidates
    _check_rejects(candidates, earlier + plan_rejects + probe_rejects, config, "by the plan and the probe")
    total_shape = output_shapes(config)[0]

    units = cut_units(samples, probes, config.output.unit_size, unit_of)
    planned = _planned(units, unit_of)
    done = staged_units(build_dir, config.output.staging_url, planned)
    committed = committed_before(config, build_dir, planned, plan_rejects, recheck)
    if committed is not None:
        return committed
    todo: list[Unit] = [u for u in units if u.index not in done]
    todo_samples = sum(len(u.samples) for u in todo)
    _check_peak_disk(config, build_dir, todo_samples, sum(map(len, planned.values())) - len(probe_rejects))
    set_aside_damaged_books(build_dir, staged=bool(done))
    stats.samples_todo += todo_samples
    stats.units_todo += len(todo)
    for reject in plan_rejects + probe_rejects:
        stats.rejects_before_encode[reject.reason] = stats.rejects_before_encode.get(reject.reason, 0) + 1
    if todo:
        check_environment(config, executor, list(done.values()))
        with progress.task("encode", len(samples), completed=len(samples) - todo_samples) as advance:
            def on_event(event: RankEvent) -> None:
                if event.stats:
                    stats.ranks[event.rank] = RankStats(**event.stats)
                if isinstance(event, UnitStaged):
                    stats.units_staged += 1
                    advance(event.samples)

            # every kernel plan the units need is decided here, once, before any rank starts (plan_pass.py)
            executor.run(todo, on_event, plan_request(config, build_dir, executor.main_device()))

    staged = staged_units(build_dir, config.output.staging_url, planned)
    staged_rejects = [r for path in staged.values() for r in read_staged_rejects(path)]
    _check_rejects(candidates, earlier + plan_rejects + staged_rejects, config, "in all")
    stats.unknown_tokens.add_units(staged.values(), config.text.max_unknown_fraction)  # said when the build ends
    started = time.perf_counter()
    result = _commit(config, build_dir, total_shape, planned, plan_rejects, executor.main_device(), allow_empty,
                     publish)
    if publish:
        record_commit(config, build_dir, planned, plan_rejects)
    stats.main_seconds["commit"] = stats.main_seconds.get("commit", 0.0) + time.perf_counter() - started
    return result


def _check_peak_disk(config: BuildConfig, build_dir: Path, to_stage: int, rows: int) -> None:
    """The disk holding the build records and the root must take, at the commit's worst moment, the units still to
    stage and every shard the commit writes (the replaced shards and the staged units go only once the commit is
    verified; what is staged or committed already is on the disk)."""
    total_shape, text_shape = output_shapes(config)

    def size(samples: int) -> int:
        return estimate_output_bytes(max(samples, 0), total_shape, text_shape, config.output.storage_dtype,
                                     rows_per_shard=config.output.rows_per_shard,
                                     conditioning=conditioning_values(config), side=side_values(config))

    check_free_disk(build_dir.parent, size(to_stage) + size(rows), config.output.min_free_bytes,
                    what=f"{to_stage} samples to stage and shards of {max(rows, 0)} samples")


def _planned(units: list[Unit], unit_of: dict[int, int] | None) -> dict[int, tuple[int, ...]]:
    """{unit: source_index of its samples} of the whole plan: the units cut here, or, for an extended plan, every
    unit `unit_of` numbers (also those staged before, whose samples are not passed again)."""
    if unit_of is None:
        return {unit.index: tuple(sample.source_index for sample in unit.samples) for unit in units}
    return planned_units(unit_of)


def _check_rejects(candidates: int, rejects: list[Reject], config: BuildConfig, when: str) -> None:
    problem = reject_problem(candidates, rejects, config.run.max_reject_fraction, when)
    if problem is not None:
        raise LatentforgeError(problem)


def _commit(config: BuildConfig, build_dir: Path, total_shape: tuple[int, ...], planned: dict[int, tuple[int, ...]],
            plan_rejects: list[Reject], device: str, allow_empty: bool, publish: bool) -> SinkCommit:
    """Every unit is staged: the sink writes shards, manifest, SHA256SUMS and, last, the marker. Fingerprints
    and the empty prompt come from the record the first rank wrote (cache/model_record.py); only without one do
    the models load here, on the executor's main device, so the result is the same for any split."""
    record: ModelRecord | None = read_model_record(build_dir)
    if record is None:  # staged by a build that left no readable record: load the models for their fingerprints
        tokenizer, text_encoder = load_models(config, device)
        record = model_record(config, tokenizer, text_encoder, device, ConditioningStage.load(config, tokenizer))
        write_model_record(build_dir, record)  # so a later commit reads it
    text = record.text
    empty_prompt = None
    if text is not None and text.empty_prompt is not None:
        empty_prompt = (text.empty_prompt.embeddings.astype(config.output.storage_dtype), text.empty_prompt.lengths)
    run_record = read_run_record(build_dir)  # the settings the staged units were made with (written before any)
    curation = curation_sections(config, run_record["key"]) if run_record is not None else None
    cache_config = cache_config_for_build(config, total_shape, record.tokenizer_fingerprint, text,
                                          record.latent_channels, record.conditioning, side_stream_records(config),
                                          curation, audio_section(config))
    cache_config = dataclasses.replace(cache_config, conv_plans=recorded_books(build_dir) or None)
    unit_paths = [path for _, path in sorted(completed_units(build_dir).items())]  # pulled just before
    readme_context = {"text_note": text.provenance_note if text is not None else None}
    staged = StagedCache(unit_paths, planned, plan_rejects, cache_config, empty_prompt, readme_context, allow_empty,
                         publish)
    return registry.resolve("sink", config.output.sink).commit(config.output, build_dir, staged)
