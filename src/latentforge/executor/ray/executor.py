"""The Ray executor (`--executor ray`): the same run_unit in Ray actors, one per GPU or CPU slot of a cluster.

Workers pull units from a small dispatcher actor pinned to the driver's node and stage them into the
shared ROOT/build/staging; the driver only moves plan records and counters, then commits as the local
executor does, so the cache is byte-identical. A worker that dies or raises has its units requeued and
is replaced; the unit it was running is charged one try, and after run.max_unit_tries failed tries the
build stops with that unit's error (staged units are kept, a rerun resumes). A worker whose node fails the
node check (executor/ray/node_check.py) has its node excluded (executor/ray/nodes.py) instead. A driver
that starts its own Ray marks every Ray process with its lock token (executor/ray/session.py), so the next
build can kill them if this driver dies. The caption and near-duplicate passes, before any unit, run their models
in one Ray task too (executor/ray/device_work_task.py). See docs/execution.md.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...config import BuildConfig
from ...errors import ConfigError, LatentforgeError, StopRequested
from ...pipeline.device_work import BatchResults, DeviceWork
from ...pipeline.kernel_plan_pass import PlanRequest
from ...pipeline.unit import Unit
from ...testing.fault_points import FAULT_ENV, MAIN_PID_ENV
from ..base import Executor
from ..events import RankEvent, RankFinished
from ..frame_slots import source_frame_bytes
from ..lock_record import read_lock_record
from ..rank import RankSpec, prompt_repeats
from ..rank_stats import RankStats
from ..worker_sizing import decode_workers, rank_torch_threads
from .device_work_task import ray_device_work
from .dispatch import QueuedUnit, UnitDispatcher
from .driver_guard import this_driver
from .kernel_plan_task import ray_plan_pass
from .node_check import node_facts
from .nodes import NodeBook
from .session import BUILD_TOKEN_ENV, record_session, start_own_ray
from .worker import RankWorker

# Test-only: `<rank>:<phase>:<n>` gives the worker with that rank (never a replacement) LATENTFORGE_FAULT=<phase>:<n>.
RAY_FAULT_ENV = "LATENTFORGE_RAY_FAULT"
_POLL_SECONDS = 0.2
_RERECORD_SECONDS = 2.0  # how often a driver that started its own Ray records its processes again
_THROUGHPUT_EVERY_SECONDS = 30.0
_STOP_GRACE_SECONDS = 5.0


def import_ray() -> Any:
    # The first worker line or error (a dead worker) the driver prints starts tqdm_ray's bar manager, which
    # replaces builtins.print for good unless this is 0: the process that ran the build kept a foreign print
    # (pickle.dumps(print) then fails). latentforge draws no tqdm_ray bars; an explicit setting still wins.
    os.environ.setdefault("RAY_TQDM_PATCH_PRINT", "0")
    try:
        import ray
    except ImportError:
        raise ConfigError("run.executor=ray needs Ray: pip install 'latentforge[ray]' on the driver and on every "
                          "node, or use run.executor=local") from None
    return ray


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
class _Signal:
    signum: int | None = None


@contextlib.contextmanager
def _signals_noted() -> Iterator[_Signal]:
    """SIGTERM/SIGINT only note the signal while Ray runs: an exception raised by a handler inside Ray's C
    code comes out as SystemError or is swallowed. The loop raises StopRequested (exit 143/130) itself.
    The handlers in place before are back afterwards."""
    noted = _Signal()
    if not on_main_thread():
        yield noted
        return

    def note(signum: int, frame: object) -> None:
        noted.signum = signum

    previous = {s: signal.signal(s, note) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield noted
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@dataclass
class _Worker:
    rank: int
    actor: Any


class _RayRun:
    def __init__(self, ray: Any, config: BuildConfig, build_dir: Path, units: list[Unit],
                 on_event: Callable[[RankEvent], None], quiet: bool, noted: _Signal, token: str, own_ray: bool,
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


@dataclass(frozen=True)
class RayOptions:
    """The Ray executor's own keys (run.KEY)."""

    ray_address: str = ""  # auto | HOST:PORT; empty joins RAY_ADDRESS or starts a local Ray
    max_unit_tries: int = 3  # a unit whose worker fails this many times stops the build with its error


def ray_options(config: BuildConfig) -> RayOptions:
    """config's Ray keys; their defaults for a RunConfig made without them."""
    options = config.run.options
    return options if isinstance(options, RayOptions) else RayOptions()


class RayExecutor(Executor):
    """The same units on a Ray cluster: one actor per GPU (or run.procs CPU actors), staging into the shared
    output root, committed by the driver."""

    name = "ray"
    options_class = RayOptions

    @classmethod
    def check_config(cls, config: BuildConfig) -> None:
        if ray_options(config).max_unit_tries < 1:
            raise ConfigError(f"run.max_unit_tries={ray_options(config).max_unit_tries} must be >= 1")
        if config.run.gpus not in ("", "all"):
            raise ConfigError(f"run.gpus={config.run.gpus!r} picks GPUs of this machine; with run.executor=ray "
                              "use --device cuda (or --gpus all): one worker per GPU of the cluster")

    def preflight(self) -> None:
        import_ray()  # the cluster itself is joined when the units start

    def settings(self) -> dict[str, Any]:
        run = self.config.run
        return {"executor": "ray", "ray_address": ray_options(self.config).ray_address, "device": run.device,
                "workers_per_gpu": run.workers_per_gpu}

    def main_device(self) -> str:
        """Where the driver would load the models at commit if no worker left a model record; workers write one
        before their first unit, so in practice the driver needs no GPU."""
        if not uses_gpus(self.config):
            return "cpu"
        return self.config.run.device if self.config.run.device.startswith("cuda") else "cuda:0"

    def parallel_ranks(self) -> int:
        """run.procs CPU workers, or one per GPU of the cluster this process is connected to (1 when it is not
        connected: the cluster's size is unknown before the build starts)."""
        if not uses_gpus(self.config):
            return self.config.run.procs
        ray = import_ray()
        return max(1, int(ray.cluster_resources().get("GPU", 0))) if ray.is_initialized() else 1

    def run(self, units: list[Unit], on_event: Callable[[RankEvent], None], plans: PlanRequest | None = None) -> None:
        """Run `units` on the Ray cluster at run.ray_address (or the one this process is already connected to),
        after the plan pass `plans` in one task on one GPU of the cluster (executor/ray/kernel_plan_task.py)."""
        with self._joined() as (ray, token, own_ray), _signals_noted() as noted:
            run = _RayRun(ray, self.config, self.build_dir, units, on_event, self.quiet, noted, token, own_ray, plans)
            try:
                run.run()
            finally:
                run.stop()

    def run_device_work(self, work: DeviceWork, on_batch: Callable[[BatchResults], None]) -> None:
        """In one Ray task on one GPU of the cluster, as a worker would hold it (executor/ray/device_work_task.py):
        the driver may have no GPU."""
        with self._joined() as (ray, token, _), _signals_noted() as noted:
            shape = worker_shape(ray, self.config, 1)  # refuses a cluster without the GPUs asked for
            ray_device_work(ray, work, on_batch, token, shape.device, shape.num_gpus, lambda: noted.signum)

    @contextlib.contextmanager
    def _joined(self) -> Iterator[tuple[Any, str, bool]]:
        """(ray, the build's lock token, whether this build started its own Ray) while connected: to the cluster
        this process is already connected to, or one joined (or started) here and left afterwards."""
        ray = import_ray()
        record = read_lock_record(self.build_dir)
        if record is None:
            raise LatentforgeError(f"{self.build_dir}/lock holds no lock record; run.executor=ray runs inside build()")
        connected_here = not ray.is_initialized()
        own_ray = connected_here and not ray_options(self.config).ray_address and not os.environ.get("RAY_ADDRESS")
        if connected_here:
            self._connect(ray, record.token, own_ray)
        try:
            yield ray, record.token, own_ray
        finally:
            if connected_here:
                ray.shutdown()

    def _connect(self, ray: Any, token: str, own_ray: bool) -> None:
        """Join run.ray_address, or start a one-machine Ray of this build's own (executor/ray/session.py)."""
        handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)} if on_main_thread() else {}
        try:
            if own_ray:
                start_own_ray(ray, self.build_dir, token, log_to_driver=not self.quiet)
            else:
                ray.init(address=ray_options(self.config).ray_address or None, log_to_driver=not self.quiet)
        finally:
            for signum, handler in handlers.items():  # ray.init put its own in place (sys.exit, C++ abort)
                signal.signal(signum, handler)
