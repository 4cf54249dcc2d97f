"""An executor places units of work on processes, GPUs or cluster nodes; it never changes what they produce.

Every executor runs the same `pipeline.unit.run_unit` (through `rank.py` or a Ray actor) and reports with the
events of events.py. Executors register by name (`run.executor`, registry.py) like readers and tokenizers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Callable, ClassVar

from ..config import BuildConfig
from ..config.schema import NoOptions
from ..pipeline.device_work import BatchResults, DeviceWork
from ..pipeline.kernel_plan_pass import PlanRequest
from ..pipeline.unit_inputs import Unit
from ..progress import Advance, uncounted
from ..records import Sample
from .events import RankEvent
from .parallel_probe import Probed, probe_plan


class Executor(ABC):
    name: str = ""
    # its own run.* keys, as a dataclass with their defaults; load_config parses them into RunConfig.options
    options_class: ClassVar[type] = NoOptions

    def __init__(self, config: BuildConfig, build_dir: Path, quiet: bool = False):
        self.config = config
        self.build_dir = Path(build_dir)
        self.quiet = quiet

    @classmethod
    def check_config(cls, config: BuildConfig) -> None:
        """Raise ConfigError for settings this executor cannot run; needs no model, data or cluster."""

    def preflight(self) -> None:
        """Raise ConfigError when this machine cannot run the build as configured (no such device, a missing
        package); runs before anything is written under the output root."""

    @abstractmethod
    def settings(self) -> dict[str, Any]:
        """The execution settings, for the run's stats (raises ConfigError when they cannot be met here)."""

    @abstractmethod
    def main_device(self) -> str:
        """Where the main process runs models when it must: commit without a model record, scan --calibrate."""

    def run_probe(self, samples: list[Sample], advance: Advance = uncounted) -> Probed:
        """{source_index: probe result or reject} of every sample (pipeline/probe.py), in the order of `samples`,
        the same wherever it runs; `advance` counts probed samples on the calling thread. Here: in processes of this
        machine (executor/parallel_probe.py)."""
        return probe_plan(samples, self.config, advance)

    def run_device_work(self, work: DeviceWork, on_batch: Callable[[BatchResults], None]) -> None:
        """Run the device half of a pass before the units (pipeline/device_work.py) where the build's models run;
        `on_batch` gets each batch's results, in order, on the calling thread. Here: in this process, on
        main_device()."""
        for results in work.batches(self.main_device()):
            on_batch(results)

    def encoding_environments(self) -> list[dict[str, str]] | None:
        """The environment (pipeline/environment.py) of each device its ranks will encode on, known before any
        of them starts; None where it is not (Ray: the nodes are known only once their workers run)."""
        return None

    @abstractmethod
    def parallel_ranks(self) -> int:
        """How many ranks would encode at once (scan's time estimate divides by it)."""

    @abstractmethod
    def run(self, units: list[Unit], on_event: Callable[[RankEvent], None], plans: PlanRequest | None = None) -> None:
        """Run every unit; `on_event` gets each UnitStaged and each RankFinished, on the calling thread. With
        `plans`, first run that plan pass in one process (pipeline/kernel_plan_pass.py), record the book it decides in
        the build's records and hand it to every rank, which replays it and times no plan of its own."""
