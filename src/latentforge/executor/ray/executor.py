"""The Ray executor (`--executor ray`): the same run_unit in Ray actors, one per GPU or CPU slot of a cluster.

Each part of a build joins the cluster (connection.py) and places its work there: the probe in CPU tasks, one per
video (probe_task.py), the units in actors (unit_run.py), the kernel plan pass and the caption and near-duplicate
passes in one Ray task each (kernel_plan_task.py, device_work_task.py). The driver only moves plan records and
counters, then commits as the local executor does, so the cache is byte-identical. A driver that starts its own
Ray marks every Ray process with its lock token (session.py), so the next build can kill them if this driver dies.
See docs/execution.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...config import BuildConfig
from ...errors import ConfigError
from ...pipeline.device_work import BatchResults, DeviceWork
from ...pipeline.kernel_plan_pass import PlanRequest
from ...pipeline.probe import probe_all
from ...pipeline.unit_inputs import Unit
from ...progress import Advance, uncounted
from ...records import Sample
from ..base import Executor
from ..events import RankEvent
from ..parallel_probe import Probed, by_video, probe_in_main
from .connection import RayOptions, import_ray, joined, ray_options, signals_noted
from .device_work_task import ray_device_work
from .probe_task import ray_probe
from .unit_run import UnitRun, uses_gpus, worker_shape


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
        with joined(self.config, self.build_dir, self.quiet) as (ray, token, own_ray), signals_noted() as noted:
            run = UnitRun(ray, self.config, self.build_dir, units, on_event, self.quiet, noted, token, own_ray, plans)
            try:
                run.run()
            finally:
                run.stop()

    def run_device_work(self, work: DeviceWork, on_batch: Callable[[BatchResults], None]) -> None:
        """In one Ray task on one GPU of the cluster, as a worker would hold it (executor/ray/device_work_task.py):
        the driver may have no GPU."""
        with joined(self.config, self.build_dir, self.quiet) as (ray, token, _), signals_noted() as noted:
            shape = worker_shape(ray, self.config, 1)  # refuses a cluster without the GPUs asked for
            ray_device_work(ray, work, on_batch, token, shape.device, shape.num_gpus, lambda: noted.signum)

    def run_probe(self, samples: list[Sample], advance: Advance = uncounted) -> Probed:
        """In CPU tasks on the cluster's workers, one per video (executor/ray/probe_task.py): they read the sources
        as the units will, and the driver may be a small machine. A plan the local executor would probe in its main
        process (few videos, or run.probe_workers=1) is probed in the driver, without joining the cluster."""
        if probe_in_main(self.config, len(by_video(samples))):
            return probe_all(samples, self.config, advance)
        with joined(self.config, self.build_dir, self.quiet) as (ray, token, _), signals_noted() as noted:
            return ray_probe(ray, samples, self.config, advance, token, lambda: noted.signum)
