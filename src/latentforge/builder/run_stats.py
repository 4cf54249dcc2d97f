"""Run accounting: per-rank clocks, CPU core-seconds, peak memory and heartbeat -> ROOT/build/stats-<utc>.json.

Nothing here is checksummed (build/ holds run records); every number is for this run only, so a resumed
run reports its own work.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from ..cache.layout import run_stats_name
from ..executor.metrics import Metrics, current_rss_bytes
from ..executor.node_faults import node_faults
from ..executor.rank_stats import RankStats, utc_stamp
from ..io import write_text_atomic
from ..pipeline.environment import environment_record
from .unknown_tokens import UnknownTokenCount


@dataclass
class RunStats:
    """The whole run: main-process stage seconds, every rank, rejects by reason."""

    started_unix: float = field(default_factory=time.time)
    main_pid: int = field(default_factory=os.getpid)
    outcome: str = "running"  # running | complete | interrupted | failed
    samples_planned: int = 0
    samples_todo: int = 0  # planned samples in units this run had to do
    main_seconds: dict[str, float] = field(default_factory=dict)  # probe, commit, ...
    ranks: dict[int, RankStats] = field(default_factory=dict)
    rejects_by_reason: dict[str, int] = field(default_factory=dict)  # the cache's, once committed
    settings: dict[str, Any] = field(default_factory=dict)
    rejects_before_encode: dict[str, int] = field(default_factory=dict)  # this run's plan and probe rejects
    units_todo: int = 0  # units this run had to encode
    units_staged: int = 0
    unknown_tokens: UnknownTokenCount = field(default_factory=UnknownTokenCount)  # over the committed rows

    @property
    def path_name(self) -> str:
        # to the microsecond: two runs within one second (a quick failure, then the rerun) keep both records
        stamp = datetime.fromtimestamp(self.started_unix, timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
        return run_stats_name(stamp)

    def environment(self) -> dict[str, str] | None:
        """Where this run encoded (pipeline.environment), None when its ranks differ. A run whose ranks
        encoded nothing (a resume that only commits) records this process's device when it has one."""
        recorded = {json.dumps(r.environment, sort_keys=True) for r in self.ranks.values() if r.environment}
        if recorded:
            return json.loads(recorded.pop()) if len(recorded) == 1 else None
        slots = self.settings.get("slots") or [self.settings.get("device", "cpu")]
        device = torch.device(slots[0])
        return environment_record(device) if device.type == "cpu" or torch.cuda.is_available() else None

    def _stage_seconds(self) -> Counter[str]:
        per_stage: Counter[str] = Counter()
        for rank in list(self.ranks.values()):
            per_stage.update(rank.seconds)
        per_stage.update(self.main_seconds)
        return per_stage

    def metrics(self) -> Metrics:
        """What the main process's endpoint serves (executor/metrics.py), summed over the ranks seen so far."""
        ranks = [self.ranks[k] for k in sorted(self.ranks)]
        encoded = sum(r.samples for r in ranks)
        rejects: Counter[str] = Counter(self.rejects_before_encode)
        for rank in ranks:
            rejects.update(rank.rejects)
        return {
            "samples_encoded": encoded,
            "samples_per_second": encoded / max(time.time() - self.started_unix, 1e-9),
            "stage_seconds": dict(sorted(self._stage_seconds().items())),
            "rejects": dict(sorted(rejects.items())),
            "queue_depth": {"units": self.units_todo - self.units_staged},
            "rss_bytes": {"main": current_rss_bytes(), **{f"rank{r.rank}": r.rss_bytes for r in ranks}},
            "gpu_memory_bytes": {str(r.rank): r.peak_gpu_bytes or 0 for r in ranks},
        }

    def summary(self) -> dict[str, Any]:
        ranks = [self.ranks[k] for k in sorted(self.ranks)]
        encoded = sum(r.samples for r in ranks)
        per_stage = self._stage_seconds()
        per_sample = {k: v / encoded for k, v in sorted(per_stage.items())} if encoded else {}
        cpu = sum(r.cpu_seconds for r in ranks)
        return {
            "utc": utc_stamp(self.started_unix),
            "outcome": self.outcome,
            "seconds": time.time() - self.started_unix,
            "main_pid": self.main_pid,
            "settings": self.settings,
            "samples_planned": self.samples_planned,
            "samples_todo": self.samples_todo,
            "samples_encoded_this_run": encoded,
            "stage_seconds": dict(sorted(per_stage.items())),
            "stage_seconds_per_sample": per_sample,
            "encoder_wait_seconds": sum(r.seconds.get("encoder_wait", 0.0) for r in ranks),
            # why the encoders waited for decoded samples, by rank, where they did (executor/input_waits.py)
            "input_waits": {str(r.rank): r.input_waits for r in ranks if r.input_waits},
            "cpu_core_seconds": cpu,
            "cpu_core_seconds_per_sample": cpu / encoded if encoded else None,
            "ranks": [r.to_json() for r in ranks],
            "rejects_by_reason": dict(sorted(self.rejects_by_reason.items())),
            # captions over text.max_unknown_fraction among the committed rows whose fraction is known
            "unknown_tokens": self.unknown_tokens.to_json(),
            # deep verify compares latents bit for bit only when every run of the build recorded an
            # environment and it equals the verifier's (verify/tolerances.py)
            "environment": self.environment(),
            "metrics": self.metrics(),  # the numbers the metrics endpoint served, at the end of the run
            "node_faults": node_faults(ranks),  # Ray: nodes excluded by the node check or failing to decode
        }

    def write(self, build_dir: Path) -> Path:
        path = Path(build_dir) / self.path_name
        write_text_atomic(path, json.dumps(self.summary(), indent=2) + "\n")
        return path
