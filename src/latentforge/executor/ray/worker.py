"""The body of one Ray worker actor: load the models once, then pull units and run them with run_unit.

Before its first unit a worker checks its node (executor/ray/node_check.py); a node that fails is
excluded by the driver. Before every staged write it checks that its build still owns the lock
(executor/ray/driver_guard.py). Units are staged synchronously into the shared ROOT/build/staging, so when a
unit raises, the unit named in the report is the one that failed, and the driver learns of a staged unit
only after it is on disk.
Decode workers are child processes of the actor, as in a local rank. Ray is imported only in here and
in the driver (it is an optional extra).
"""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path
from typing import Any, Callable

import torch

from ...cache.layout import MODEL_RECORD
from ...pipeline.models import load_models, record_models
from ...pipeline.unit import StagedPayload, UnitContext, run_unit, stage_now
from ...pipeline.unit_inputs import Unit
from ...text.prompt_cache import PromptCache
from ..decode_stream import DecodeStream
from ..events import RankFinished, UnitStaged
from ..input_waits import explain_input_waits
from ..rank import RankSpec, describe_failure, serve_rank_metrics
from ..rank_stats import RankStats
from ..worker_sizing import usable_cores
from .driver_guard import DriverGuard, DriverIdentity
from .node_check import NodeCheckFailed, NodeFacts, check_node


def node_name(ray: Any) -> tuple[str, str]:
    """(node id, "<hostname> (node <id prefix>, <ip>)") of the node this process runs on."""
    node_id = ray.get_runtime_context().get_node_id()
    # the address the node registered with (ray start --node-ip-address), as `ray status` shows it
    ip = next((n["NodeManagerAddress"] for n in ray.nodes() if n["NodeID"] == node_id),
              ray.util.get_node_ip_address())
    return node_id, f"{socket.gethostname()} (node {node_id[:12]}, {ip})"


class RankWorker:
    """One encoder per GPU (num_gpus=1) or per CPU slot; `rank` is unique per actor, replacements included."""

    def __init__(self, spec: RankSpec, dispatcher: Any, facts: NodeFacts, driver: DriverIdentity):
        self.spec = spec
        self.dispatcher = dispatcher
        self.facts = facts
        self.guard = DriverGuard(spec.build_dir, driver, check_lock=not spec.config.output.staging_url)

    def serve(self) -> RankFinished:
        import ray

        spec = self.spec
        self.guard.watch()  # the driver's death ends this worker, however busy it is
        node_id, where = node_name(ray)
        node = f"{where} pid {os.getpid()}"
        stats = RankStats(rank=spec.rank, pid=os.getpid(), device=spec.device, workers=spec.workers, node=where,
                          node_id=node_id)
        stream: DecodeStream | None = None
        ctx: UnitContext | None = None
        live: dict[str, Callable[[], int]] = {}
        metrics = contextlib.ExitStack()
        try:
            check_node(spec.config, spec.build_dir, self.facts)
        except NodeCheckFailed as failed:  # the driver excludes this node; no unit was taken
            stats.node_check = str(failed)
            return RankFinished(spec.rank, self._finish(stats, None, None), str(failed), node)
        try:
            metrics.enter_context(serve_rank_metrics(spec, stats, lambda: {k: depth() for k, depth in live.items()}))
            if spec.torch_threads is not None:
                torch.set_num_threads(spec.torch_threads)
            tokenizer, text = load_models(spec.config, torch.device(spec.device), spec.plans)
            write = stage_now(Path(spec.build_dir), spec.config.output.staging_url)

            def stage(payload: StagedPayload) -> None:
                self.guard.check()  # a build that lost its driver or its lock stages nothing more
                write(payload)
                stats.accepted += len(payload.rows)
                stats.add_rejects(r.reason for r in payload.rejects)

            cache = PromptCache(text, repeats=spec.repeats) if text is not None else None
            ctx = UnitContext(spec.config, tokenizer, cache, stage)
            if not (Path(spec.build_dir) / MODEL_RECORD).exists():  # any worker may record; the contents are equal
                record_models(Path(spec.build_dir), spec.config, tokenizer, text, torch.device(spec.device),
                              ctx.conditioning)
            stream = DecodeStream(spec.config, self._take, spec.workers, device=torch.device(spec.device),
                                  frame_bytes=spec.frame_bytes)
            stats.transport = stream.transport
            live["decode"] = lambda: stream.queued_samples
            for unit, decoded in stream.units():
                run_unit(unit, ctx, decoded)
                stats.units += 1
                stats.samples += len(unit.samples)
                self._report(unit, stats, stream, ctx, node)
        except Exception as error:  # noqa: BLE001 - the driver decides: reschedule, or report after N tries
            failure = describe_failure(error, spec.build_dir, spec.rank)
            return RankFinished(spec.rank, self._finish(stats, stream, None), failure, node)
        finally:
            metrics.close()
            if ctx is not None:
                ctx.close()
            if stream is not None:
                stream.close()
        return RankFinished(spec.rank, self._finish(stats, stream, ctx), None, node)

    def _take(self) -> Unit | None:
        import ray

        queued = ray.get(self.dispatcher.take.remote(self.spec.rank))
        return queued.unit() if queued is not None else None

    def _report(self, unit: Unit, stats: RankStats, stream: DecodeStream, ctx: UnitContext, node: str) -> None:
        import ray

        self._fill_seconds(stats, stream, ctx, self.spec.config.frames.resize_backend)
        # Waited on, so the unit counts as staged before the worker can fail on the next one.
        ray.get(self.dispatcher.staged.remote(UnitStaged(self.spec.rank, unit.index, len(unit.samples),
                                                         stats.to_json(), node)))

    @staticmethod
    def _fill_seconds(stats: RankStats, stream: DecodeStream, ctx: UnitContext, resize_backend: str) -> None:
        for key in ("encode", "text"):
            stats.seconds[key] = ctx.seconds.get(key, 0.0)
        stats.seconds["stage"] = ctx.seconds.get("stage_handoff", 0.0)  # stage_now writes inside the hand-off
        stats.seconds["decode"] = stream.decode_seconds
        stats.seconds["encoder_wait"] = stream.wait_seconds
        stats.seconds["encoder_wait_first"] = stream.first_wait_seconds or 0.0
        stats.beat(stream.worker_cpu_seconds)
        stats.input_waits = explain_input_waits(stats, usable_cores(), resize_backend)
        if ctx.text is not None:
            stats.prompt_cache = ctx.text.stats()

    def _finish(self, stats: RankStats, stream: DecodeStream | None, ctx: UnitContext | None) -> dict[str, Any]:
        if stream is not None and ctx is not None:
            self._fill_seconds(stats, stream, ctx, self.spec.config.frames.resize_backend)
        else:
            stats.beat(stream.worker_cpu_seconds if stream is not None else 0.0)
        return stats.to_json()
