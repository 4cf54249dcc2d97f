"""One encoder process ("rank"): loads the models once, then runs whichever units it is handed.

The same code runs inside the main process (one slot) or in a spawned child per GPU / CPU slot.
"""

from __future__ import annotations

import contextlib
import os
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from ..cache.layout import rank_traceback_name
from ..config import BuildConfig
from ..errors import LatentforgeError, UnitFailed, as_os_error, environment_message
from ..pipeline.kernel_plan_pass import DecidedPlans
from ..pipeline.models import load_models, record_models
from ..pipeline.probe import ProbeResult
from ..pipeline.unit import StagedPayload, UnitContext, run_unit
from ..pipeline.unit_inputs import Unit
from ..text.prompt_cache import PromptCache
from ..text.prompt_repeats import PromptRepeats
from .decode_stream import DecodeStream
from .events import RankEvent, RankFinished, UnitStaged
from .input_waits import explain_input_waits
from .metrics import MetricsServer, current_rss_bytes, rank_metrics_port
from .process_setup import child_process_setup, dump_stacks_on_sigusr1, stacks_file
from .rank_stats import RankStats
from .staging_writer import StagingWriter
from .unit_profile import UnitProfiler
from .worker_sizing import usable_cores


@dataclass(frozen=True)
class RankSpec:
    rank: int
    device: str
    workers: int  # CPU decode workers; 0 decodes on the encoder thread
    torch_threads: int | None  # None keeps torch's default
    config: BuildConfig
    build_dir: str
    frame_bytes: int = 0  # the largest RGB frame as decode workers ship it, when not the output's (frame_slots.py)
    plans: DecidedPlans | None = None  # the kernel plans the build's plan pass decided; None: it runs none
    # the prompts of more than one unit, the only rows its prompt cache keeps; None: it keeps every row
    repeats: PromptRepeats | None = None


def prompt_repeats(config: BuildConfig, units: list[Unit]) -> PromptRepeats | None:
    """The prompts the units encode in more than one unit, for every rank's spec; None where no unit runs an
    encoder. A prompt whose sample is later rejected still counts: a row kept for nothing costs memory only."""
    if config.text.name == "none" or config.text.source == "pickles":
        return None
    return PromptRepeats.across([probe.caption for probe in unit.probes.values() if isinstance(probe, ProbeResult)]
                                for unit in units)


def serve_rank_metrics(spec: RankSpec, stats: RankStats, queues: Callable[[], dict[str, int]]
                       ) -> contextlib.AbstractContextManager:
    """The rank's Prometheus endpoint while the block runs (run.metrics_port + 1 + rank), or nothing."""
    run = spec.config.run
    if not run.metrics_port:
        return contextlib.nullcontext()
    server = MetricsServer(run.metrics_host, rank_metrics_port(run.metrics_port, spec.rank),
                           lambda: stats.metrics(queues(), current_rss_bytes()), f"rank {spec.rank}")
    return contextlib.closing(server)


def run_rank(spec: RankSpec, units: dict[int, Unit], next_index: Callable[[], int | None],
             report: Callable[[RankEvent], None],
             on_stream: Callable[[DecodeStream], None] = lambda stream: None) -> RankStats:
    stats = RankStats(rank=spec.rank, pid=os.getpid(), device=spec.device, workers=spec.workers)
    live: dict[str, Callable[[], int]] = {}
    with serve_rank_metrics(spec, stats, lambda: {name: depth() for name, depth in live.items()}):
        return _run_rank(spec, stats, live, units, next_index, report, on_stream)


def _run_rank(spec: RankSpec, stats: RankStats, live: dict[str, Callable[[], int]], units: dict[int, Unit],
              next_index: Callable[[], int | None], report: Callable[[RankEvent], None],
              on_stream: Callable[[DecodeStream], None]) -> RankStats:
    if spec.torch_threads is not None:
        torch.set_num_threads(spec.torch_threads)
    device = torch.device(spec.device)
    tokenizer, text = load_models(spec.config, device, spec.plans)

    def next_unit() -> Unit | None:
        index = next_index()
        return None if index is None else units[index]

    stream = DecodeStream(spec.config, next_unit, spec.workers, (spec.build_dir, f"rank{spec.rank}-decode"), device,
                          spec.frame_bytes)
    stats.transport = stream.transport
    on_stream(stream)

    def staged(payload: StagedPayload, seconds: float) -> None:  # on the writer thread
        stats.seconds["stage"] = stats.seconds.get("stage", 0.0) + seconds
        stats.units += 1
        stats.samples += payload.num_samples
        stats.accepted += len(payload.rows)
        stats.add_rejects(r.reason for r in payload.rejects)
        stats.queues = {name: depth() for name, depth in live.items()}
        # Live clocks with every staged unit, so a run stopped by SIGTERM still reports them (bench/build/build.py).
        record_stream_clocks()
        report(UnitStaged(spec.rank, payload.unit, payload.num_samples, stats.to_json()))

    def record_stream_clocks() -> None:
        stats.seconds.update(encode=ctx.seconds.get("encode", 0.0), text=ctx.seconds.get("text", 0.0),
                             decode=stream.decode_seconds, encoder_wait=stream.wait_seconds,
                             encoder_wait_first=stream.first_wait_seconds or 0.0)
        stats.beat(stream.worker_cpu_seconds)
        stats.input_waits = explain_input_waits(stats, usable_cores(), spec.config.frames.resize_backend)
        if ctx.text is not None:
            stats.prompt_cache = ctx.text.stats()

    writer = StagingWriter(Path(spec.build_dir), staged, spec.config.output.staging_url)
    live.update(decode=lambda: stream.queued_samples, staging=lambda: writer.pending)
    cache = PromptCache(text, repeats=spec.repeats) if text is not None else None
    ctx = UnitContext(spec.config, tokenizer, cache, writer)
    if spec.rank == 0:  # commit then needs no models of its own
        record_models(Path(spec.build_dir), spec.config, tokenizer, text, device, ctx.conditioning)
    profiler = UnitProfiler(spec.rank, device)
    try:
        for unit, decoded in stream.units():
            try:
                with profiler.around_unit():
                    run_unit(unit, ctx, decoded)
            except Exception as error:
                if isinstance(error, LatentforgeError) or as_os_error(error) is not None:
                    raise  # already says what and where
                raise UnitFailed(unit.index, [s.sample_id for s in unit.samples], error) from error
    except BaseException:
        stream.abort()
        ctx.close()
        # The units encoded before the failure stay staged, and no write outlives the rank (a rerun in the same
        # process would otherwise find a unit half written and encode it again beside the late write). A write
        # error raised here is the failure itself or comes after it: the first one is the one to report.
        with contextlib.suppress(Exception):
            writer.close()
        raise
    profiler.close()
    ctx.close()
    stream.close()
    writer.close()
    record_stream_clocks()
    return stats


def describe_failure(error: BaseException, build_dir: str | Path, rank: int) -> str:
    """One line for the main process; the full traceback goes to build/rank<N>-traceback.txt."""
    cause = as_os_error(error)
    message = environment_message(cause) if cause is not None else None
    if message is not None:
        return message
    path = Path(build_dir) / rank_traceback_name(rank)
    with contextlib.suppress(OSError):
        path.write_text("".join(traceback.format_exception(error)), encoding="utf-8")
    lines = str(error).strip().splitlines()
    line = lines[0] if isinstance(error, LatentforgeError) and lines else (
        type(error).__name__ + (f": {lines[0]}" if lines else ""))
    return f"{line} (traceback in {path})"


def rank_process_main(spec: RankSpec, units: dict[int, Unit], tasks: Any, results: Any) -> None:
    """Entry point of a spawned rank: tasks yields unit indices (None = no more), results gets its events."""
    child_process_setup()
    streams: list[DecodeStream] = []
    dump_stacks_on_sigusr1(lambda: [pid for s in streams for pid in s.worker_pids()],
                           stacks_file(spec.build_dir, f"rank{spec.rank}"))
    try:
        stats = run_rank(spec, units, tasks.get, results.put, streams.append)
    except BaseException as error:  # noqa: BLE001 - every failure goes to the main process as text
        results.put(RankFinished(spec.rank, {}, describe_failure(error, spec.build_dir, spec.rank)))
        results.close()
        results.join_thread()
        os._exit(1)
    results.put(RankFinished(spec.rank, stats.to_json()))
    results.close()
    results.join_thread()
