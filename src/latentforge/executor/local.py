"""The local executor: one rank per GPU or CPU slot, units handed to whichever rank asks next.

A single slot runs its rank in the main process (no model is loaded twice); more slots are spawned
processes fed from one queue. Which rank ran a unit never changes the output.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue
from dataclasses import dataclass
from typing import Any, Callable

from .. import registry
from ..cache.layout import STACKS_DIR
from ..config import BuildConfig
from ..devices import CPU_ADVICE, check_device_present, no_gpu_reason
from ..errors import ConfigError, LatentforgeError
from ..pipeline.environment import environment_record
from ..pipeline.kernel_plan_pass import PlanRequest
from ..pipeline.unit_inputs import Unit
from .base import Executor
from .events import RankEvent, RankFinished
from .frame_slots import source_frame_bytes
from .kernel_plan_decision import decide_local_plans
from .metrics import check_port_free, rank_metrics_port
from .process_setup import child_signals_held, dump_stacks_on_sigusr1, remove_empty_stack_files
from .rank import RankSpec, prompt_repeats, rank_process_main, run_rank
from .worker_sizing import decode_workers, rank_torch_threads

_POLL_SECONDS = 0.2
_STOP_GRACE_SECONDS = 5.0


@dataclass(frozen=True)
class Slots:
    devices: tuple[str, ...]
    workers: int

    @property
    def torch_threads(self) -> int | None:
        return rank_torch_threads(self.devices[0], len(self.devices), self.workers)


def resolve_slots(config: BuildConfig) -> Slots:
    """`run.gpus` (all | 0,1,...: indices within CUDA_VISIBLE_DEVICES) wins; else run.procs x run.device."""
    run = config.run
    if run.gpus:
        import torch

        available = torch.cuda.device_count()
        if available == 0:
            raise ConfigError(f"run.gpus={run.gpus!r} starts one encoder process per GPU, but {no_gpu_reason()}; "
                              f"{CPU_ADVICE}")
        if run.gpus == "all":
            indices = list(range(available))
        else:
            try:
                indices = [int(part) for part in run.gpus.split(",") if part.strip()]
            except ValueError:
                raise ConfigError(f"run.gpus={run.gpus!r}; allowed: all, or GPU indices such as 0,1") from None
        bad = [i for i in indices if not 0 <= i < available]
        if not indices or bad or len(set(indices)) != len(indices):
            raise ConfigError(f"run.gpus={run.gpus!r}: this machine shows {available} GPU(s) (indices within "
                              f"CUDA_VISIBLE_DEVICES); allowed: all or distinct indices below {available}")
        devices = tuple(f"cuda:{i}" for i in indices)
    else:
        devices = (run.device,) * run.procs
    return Slots(devices, decode_workers(run.workers_per_gpu, devices[0], len(devices)))


class LocalExecutor(Executor):
    name = "local"

    def preflight(self) -> None:
        slots = resolve_slots(self.config)
        for device in sorted(set(slots.devices)):
            check_device_present(device, "run.device" if not self.config.run.gpus else "run.gpus")
        run = self.config.run
        if run.metrics_port:  # every rank runs on this machine and serves the port after the main process's
            for rank in range(len(slots.devices)):
                check_port_free(run.metrics_host, rank_metrics_port(run.metrics_port, rank), f"rank {rank}")

    def settings(self) -> dict[str, Any]:
        slots = resolve_slots(self.config)
        return {"slots": list(slots.devices), "workers_per_gpu": self.config.run.workers_per_gpu,
                "decode_workers_per_rank": slots.workers}

    def main_device(self) -> str:
        return resolve_slots(self.config).devices[0]

    def parallel_ranks(self) -> int:
        return len(resolve_slots(self.config).devices)

    def encoding_environments(self) -> list[dict[str, str]]:
        """Read in this process, with the variables a rank sets before its model loads (os.environ wins, as in
        the rank); on CUDA this starts the CUDA runtime here, as the run's stats do at the end."""
        tokenizer = registry.resolve("tokenizer", self.config.tokenizer.name)
        return [environment_record(device, {**tokenizer.process_environment(self.config.tokenizer, device),
                                            **os.environ})
                for device in sorted(set(resolve_slots(self.config).devices))]

    def run(self, units: list[Unit], on_event: Callable[[RankEvent], None], plans: PlanRequest | None = None) -> None:
        slots = resolve_slots(self.config)
        by_index = {u.index: u for u in units}
        frame_bytes = source_frame_bytes(self.config, units)
        decided = None
        if plans is not None:
            devices = sorted(set(slots.devices))  # in encoding_environments' order
            decided = decide_local_plans(plans, devices, self.encoding_environments(), self.build_dir)
        repeats = prompt_repeats(self.config, units)
        specs = [RankSpec(rank, device, slots.workers, slots.torch_threads, self.config, str(self.build_dir),
                          frame_bytes, decided, repeats) for rank, device in enumerate(slots.devices)]
        note = f"latentforge: stacks of the other processes of this build go to {self.build_dir / STACKS_DIR}/"
        try:
            if len(specs) == 1:
                _run_inline(specs[0], by_index, on_event, note)
            else:
                _run_spawned(specs, by_index, on_event, note)
        finally:
            remove_empty_stack_files(self.build_dir)


def _run_inline(spec: RankSpec, units: dict[int, Unit], on_event: Callable[[RankEvent], None], note: str) -> None:
    pending = iter(sorted(units))
    streams = []
    dump_stacks_on_sigusr1(lambda: [pid for s in streams for pid in s.worker_pids()], note=note)
    stats = run_rank(spec, units, lambda: next(pending, None), on_event, streams.append)
    on_event(RankFinished(spec.rank, stats.to_json()))


def _run_spawned(specs: list[RankSpec], units: dict[int, Unit], on_event: Callable[[RankEvent], None],
                 note: str) -> None:
    context = multiprocessing.get_context("spawn")
    tasks, results = context.Queue(), context.Queue()
    for index in sorted(units):
        tasks.put(index)
    for _ in specs:
        tasks.put(None)
    processes = {spec.rank: context.Process(target=rank_process_main, args=(spec, units, tasks, results),
                                            name=f"latentforge-rank{spec.rank}") for spec in specs}
    # only live ranks: the pid of one that was joined may already belong to another process
    dump_stacks_on_sigusr1(lambda: [p.pid for p in processes.values() if p.pid is not None and p.exitcode is None],
                           note=note)
    running = set(processes)
    try:
        with child_signals_held():
            for process in processes.values():
                process.start()
        while running:
            try:
                event: RankEvent = results.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                _check_alive(processes, running)
                continue
            if isinstance(event, RankFinished):
                if event.error is not None:
                    raise LatentforgeError(f"rank {event.rank} ({specs[event.rank].device}) failed: {event.error}")
                processes[event.rank].join()
                running.discard(event.rank)
            on_event(event)
    finally:
        _stop(processes.values())


def _check_alive(processes, running: set[int]) -> None:
    for rank in sorted(running):
        code = processes[rank].exitcode
        if code is not None:
            raise LatentforgeError(f"rank {rank} died with exit code {code} before finishing its units; "
                                   "rerun the same command to resume")


def _stop(processes) -> None:
    """SIGTERM every live rank (its decode workers follow by PR_SET_PDEATHSIG), SIGKILL what lingers."""
    alive = [p for p in processes if p.pid is not None and p.exitcode is None]
    for process in alive:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
    for process in alive:
        process.join(_STOP_GRACE_SECONDS)
        if process.exitcode is None:
            process.kill()
            process.join()
