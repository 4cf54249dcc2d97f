"""The units of a Ray build (RayExecutor.run): one actor per GPU or CPU slot of the cluster, run until the queue is
empty.

Workers pull units from a small dispatcher actor pinned to the driver's node and stage them into the shared
ROOT/build/staging; the driver only moves plan records and counters. A worker that dies or raises has its units
requeued and is replaced; the unit it was running is charged one try, and after run.max_unit_tries failed tries the
build stops with that unit's error (staged units are kept, a rerun resumes). A worker whose node fails the node
check (node_check.py) has its node excluded (nodes.py) instead.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...config import BuildConfig
from ...errors import ConfigError, LatentforgeError, StopRequested
from ...pipeline.kernel_plan_pass import PlanRequest
from ...pipeline.unit_inputs import Unit
from ...testing.fault_points import FAULT_ENV, MAIN_PID_ENV
from ..events import RankEvent, RankFinished
from ..frame_slots import source_frame_bytes
from ..rank import RankSpec, prompt_repeats
from ..rank_stats import RankStats
from ..worker_sizing import decode_workers, rank_torch_threads
from .connection import NotedSignal, ray_options
from .dispatch import QueuedUnit, UnitDispatcher
from .driver_guard import this_driver
from .kernel_plan_task import ray_plan_pass
from .node_check import node_facts
from .nodes import NodeBook
from .session import BUILD_TOKEN_ENV, record_session
from .worker import RankWorker

# Test-only: `<rank>:<phase>:<n>` gives the worker with that rank (never a replacement) LATENTFORGE_FAULT=<phase>:<n>.
RAY_FAULT_ENV = "LATENTFORGE_RAY_FAULT"
_POLL_SECONDS = 0.2
_RERECORD_SECONDS = 2.0  # how often a driver that started its own Ray records its processes again
_THROUGHPUT_EVERY_SECONDS = 30.0
_STOP_GRACE_SECONDS = 5.0


def uses_gpus(config: BuildConfig) -> bool:
    return config.run.device.startswith("cuda") or bool(config.run.gpus)


def _local_gpus() -> int:
    import torch

    return max(1, torch.cuda.device_count())


@dataclass(frozen=True)
class WorkerShape:
    count: int
    device: str  # as the actor sees it: Ray sets CUDA_VISIBLE_DEVICES to the one GPU it assigned
    num_gpus: int


def worker_shape(ray: Any, config: BuildConfig, units: int) -> WorkerShape:
    """One GPU actor per GPU the cluster shows, or run.procs CPU actors; never more actors than units."""
    if not uses_gpus(config):
        return WorkerShape(max(1, min(config.run.procs, units)), "cpu", 0)
    gpus = int(ray.cluster_resources().get("GPU", 0))
    if gpus < 1:
        raise ConfigError(f"run.device={config.run.device!r} asks for GPU workers but the Ray cluster shows no GPU; "
                          "start the workers with GPUs (ray start ... --num-gpus N) or use --device cpu")
    return WorkerShape(min(gpus, units), "cuda:0", 1)


def _fault_env(rank: int) -> dict[str, str]:
    """The fault for this rank's worker, which kills only itself: a main process id left in the driver's
    environment by an earlier in-process build must not reach it."""
    target, _, fault = os.environ.get(RAY_FAULT_ENV, "").partition(":")
    return {FAULT_ENV: fault, MAIN_PID_ENV: ""} if fault and target == str(rank) else {}


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


@dataclass
class _Worker:
    rank: int
    actor: Any


class UnitRun:
    def __init__(self, ray: Any, config: BuildConfig, build_dir: Path, units: list[Unit],
                 on_event: Callable[[RankEvent], None], quiet: bool, noted: NotedSignal, token: str, own_ray: bool,
                 plans: PlanRequest | None):
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self.ray, self.config, self.build_dir = ray, config, build_dir
        self.on_event, self.quiet = on_event, quiet
        self.ranks: dict[int, RankStats] = {}
        self.shape = worker_shape(ray, config, len(units))  # refuses a cluster without the GPUs asked for
        # every worker replays the book this plan pass decides, handed over in its RankSpec
        self.plans = ray_plan_pass(ray, plans, build_dir, token, self.shape.device) if plans is not None else None
        # auto counts the driver's machine: its cores shared by its GPUs (docs/execution.md)
        self.decode_workers = decode_workers(config.run.workers_per_gpu, self.shape.device, _local_gpus())
        # On the driver's node, so losing a worker node never loses the queue.
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        self.dispatcher = ray.remote(num_cpus=0, scheduling_strategy=here)(UnitDispatcher).remote(
            [QueuedUnit.of(u) for u in units])
        self.actor_class = ray.remote(RankWorker)
        self.token = token
        self.frame_bytes = source_frame_bytes(config, units)
        self.repeats = prompt_repeats(config, units)  # in every worker's spec, replacements' too
        self.facts = node_facts(config, build_dir, units, token)
        self.driver = this_driver(token, same_machine=own_ray)
        self.own_ray, self.recorded = own_ray, time.monotonic()
        self.nodes_book = NodeBook(ray, self.shape.num_gpus)
        self.running: dict[Any, _Worker] = {}
        self.started: dict[int, float] = {}  # rank -> when the driver created it
        self.last_staged: dict[int, float] = {}
        self.nodes: dict[int, str] = {}
        self.next_rank = 0
        self.left = len(units)
        self.failed_before_a_unit = 0
        self.noted = noted  # a SIGTERM/SIGINT, raised as StopRequested between Ray calls

    def say(self, message: str) -> None:
        if not self.quiet:
            from rich import get_console

            get_console().print(message, soft_wrap=True, markup=False)  # above the progress bar

    def start_worker(self) -> None:
        rank, self.next_rank = self.next_rank, self.next_rank + 1
        threads = rank_torch_threads(self.shape.device, 1, self.decode_workers)  # one rank per actor's slot
        spec = RankSpec(rank, self.shape.device, self.decode_workers, threads, self.config, str(self.build_dir),
                        self.frame_bytes, self.plans, self.repeats)
        options: dict[str, Any] = {"num_cpus": 1, "num_gpus": self.shape.num_gpus, "max_restarts": 0,
                                   "runtime_env": {"env_vars": {BUILD_TOKEN_ENV: self.token, **_fault_env(rank)}}}
        options.update(self.nodes_book.placement())
        actor = self.actor_class.options(**options).remote(spec, self.dispatcher, self.facts, self.driver)
        self.running[actor.serve.remote()] = _Worker(rank, actor)
        self.started[rank] = time.time()  # driver clock, as last_staged: throughput needs no synced clocks

    def drain(self) -> None:
        events, self.left = self.ray.get(self.dispatcher.drain.remote())
        for event in events:
            self.ranks[event.rank] = RankStats(**event.stats)
            self.nodes[event.rank] = event.node
            self.last_staged[event.rank] = time.time()
            self.on_event(event)
        for line in self.nodes_book.new_decode_faults(list(self.ranks.values())) if events else []:
            self.say(line)
        if self.own_ray and time.monotonic() - self.recorded >= _RERECORD_SECONDS:
            # Ray starts some agents late (later still on a loaded machine) and without the token: record them
            # while their raylet lives, so the next build can still find them after they are orphaned
            record_session(self.build_dir, self.token)
            self.recorded = time.monotonic()

    def run(self) -> None:
        for _ in range(self.shape.count):
            self.start_worker()
        printed = time.monotonic()
        while self.running:
            if self.noted.signum is not None:
                raise StopRequested(self.noted.signum)
            ready, _ = self.ray.wait(list(self.running), num_returns=1, timeout=_POLL_SECONDS)
            self.drain()
            for ref in ready:
                self.finished(ref)
            if time.monotonic() - printed >= _THROUGHPUT_EVERY_SECONDS:
                self.print_throughput()
                printed = time.monotonic()
        self.drain()
        if self.left:
            raise LatentforgeError(f"{self.left} unit(s) were not staged although every Ray worker finished; "
                                   "rerun the same command to resume")
        self.print_throughput()

    def finished(self, ref: Any) -> None:
        worker = self.running.pop(ref)
        died = False
        try:
            outcome: RankFinished = self.ray.get(ref)
        except self.ray.exceptions.RayActorError as error:
            died = True
            outcome = RankFinished(worker.rank, {}, f"the worker process died: {_one_line(str(error))}")
        except self.ray.exceptions.RayTaskError as error:
            raise LatentforgeError(f"Ray worker {worker.rank} could not start serving: {error}; is the same "
                                   "latentforge installed on every node?") from None
        if outcome.error is None:
            self.ranks[worker.rank] = RankStats(**outcome.stats)
            self.on_event(outcome)
            return
        self.ray.kill(worker.actor)
        where = outcome.node or self.nodes.get(worker.rank, "unknown node")
        charge = self.ray.get(self.dispatcher.release.remote(worker.rank))
        if outcome.stats.get("node_check"):
            self.exclude(worker.rank, RankStats(**outcome.stats), outcome)
            return
        tries = ray_options(self.config).max_unit_tries
        if charge is None:
            self.failed_before_a_unit += 1
            if not died or self.failed_before_a_unit >= tries:
                raise LatentforgeError(f"Ray worker {worker.rank} ({where}) failed before taking a unit:\n"
                                       f"{outcome.error}")
        elif charge.tries >= tries:
            raise LatentforgeError(
                f"unit {charge.unit} (samples {charge.first_sample} .. {charge.last_sample}) failed {charge.tries} "
                f"time(s), the limit run.max_unit_tries={tries}; last error (worker {worker.rank}, {where}):\n"
                f"{outcome.error}\nstaged units are kept: fix the cause and rerun the same command to resume")
        else:
            self.say(f"Ray worker {worker.rank} ({where}) stopped on unit {charge.unit}, try {charge.tries} of "
                     f"{tries}: {_one_line(outcome.error.splitlines()[-1])}; rescheduling it")
        self.replace_worker()

    def replace_worker(self) -> None:
        """A replacement only when units wait in the queue: the rest are held by running workers, and one of
        those that fails later requeues them and starts its own replacement. (A replacement for an empty queue
        would load the models for nothing.)"""
        if self.ray.get(self.dispatcher.pending.remote()):
            self.start_worker()

    def exclude(self, rank: int, stats: RankStats, outcome: RankFinished) -> None:
        """The worker's node failed the node check: no worker is placed there again in this build."""
        self.ranks[rank] = stats
        self.on_event(outcome)
        self.say(self.nodes_book.exclude(stats))
        self.replace_worker()

    def print_throughput(self) -> None:
        for rank in sorted(self.ranks):
            stats = self.ranks[rank]
            seconds = self.last_staged.get(rank, time.time()) - self.started.get(rank, time.time())
            rate = stats.samples / seconds if seconds > 0 else 0.0
            self.say(f"Ray worker {rank} ({stats.device}, {self.nodes.get(rank, '?')}): {stats.units} units, "
                     f"{stats.samples} samples, {rate:.2f} samples/s since it started")

    def stop(self) -> None:
        """Kill what is still running (an error or Ctrl-C ended the run); staged units stay for a resume."""
        for worker in self.running.values():
            self.ray.kill(worker.actor)
        if self.running:  # gone before the lock is released, so no write races a rerun's tmp cleanup
            self.ray.wait(list(self.running), num_returns=len(self.running), timeout=_STOP_GRACE_SECONDS)
        self.ray.kill(self.dispatcher)
