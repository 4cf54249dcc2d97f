"""One encoder process's accounting: clocks per stage, CPU core-seconds, peak memory, heartbeat and the
environment it encoded in. Sent to the main process with every staged unit (executor/events.py)."""

from __future__ import annotations

import resource
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable

import torch

from ..pipeline.environment import environment_record
from .metrics import Metrics, current_rss_bytes


def utc_stamp(when: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if when is None else when, timezone.utc).strftime("%Y%m%dT%H%M%SZ")


@dataclass
class RankStats:
    """One encoder process (rank). decode seconds are summed over its CPU workers, so they can exceed wall."""

    rank: int
    pid: int
    device: str
    workers: int
    units: int = 0
    samples: int = 0  # planned samples of the units it ran (accepted or rejected)
    accepted: int = 0
    # decode, encode, text, stage, encoder_wait (encoder_wait_first: of it, before the first sample)
    seconds: dict[str, float] = field(default_factory=dict)
    cpu_seconds: float = 0.0  # this process plus its decode workers
    peak_host_bytes: int = 0  # max resident set size of the rank process
    peak_gpu_bytes: int | None = None
    heartbeat_utc: str = ""
    heartbeat_unix: float = 0.0
    environment: dict[str, str] = field(default_factory=dict)  # device model and software it encoded with
    rejects: dict[str, int] = field(default_factory=dict)  # samples its units rejected, by reason
    rss_bytes: int = 0  # resident memory at the last heartbeat
    queues: dict[str, int] = field(default_factory=dict)  # decode, staging: work waiting at the last heartbeat
    transport: str = ""  # how decoded frames reach the encoder (shared memory, page-locked; or why not)
    input_waits: str = ""  # why the encoder waited for decoded samples, when it did (executor/input_waits.py)
    prompt_cache: dict[str, int] = field(default_factory=dict)  # text/prompt_cache.PromptCache.stats(); {}: no encoder
    started_unix: float = field(default_factory=time.time)
    node: str = ""  # Ray: "<hostname> (node <id>, <ip>)"; empty for a local rank
    node_id: str = ""  # Ray's node id
    node_check: str = ""  # Ray: why the node check excluded this rank's node (executor/ray/node_check.py)

    def add_rejects(self, reasons: Iterable[str]) -> None:
        for reason in reasons:
            self.rejects[reason] = self.rejects.get(reason, 0) + 1

    def beat(self, worker_cpu_seconds: float) -> None:
        """Refresh the clocks that are read from the OS, and the heartbeat (in the rank's own process, so
        the environment is the one that encoded, also on a remote Ray node)."""
        if not self.environment:
            self.environment = environment_record(self.device)
        self.cpu_seconds = time.process_time() + worker_cpu_seconds
        self.peak_host_bytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        self.rss_bytes = current_rss_bytes()
        if self.device.startswith("cuda"):
            self.peak_gpu_bytes = int(torch.cuda.max_memory_allocated(self.device))
        self.heartbeat_unix = time.time()
        self.heartbeat_utc = utc_stamp(self.heartbeat_unix)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def metrics(self, queues: dict[str, int] | None = None, rss_bytes: int | None = None) -> Metrics:
        """What the rank's endpoint serves (executor/metrics.py): the last beat's numbers, with live queue
        depths and resident memory where given."""
        elapsed = max(time.time() - self.started_unix, 1e-9)
        return {"samples_encoded": self.samples, "samples_per_second": self.samples / elapsed,
                "stage_seconds": dict(self.seconds), "rejects": dict(self.rejects),
                "queue_depth": dict(self.queues if queues is None else queues),
                "rss_bytes": {f"rank{self.rank}": self.rss_bytes if rss_bytes is None else rss_bytes},
                "gpu_memory_bytes": {str(self.rank): self.peak_gpu_bytes or 0}}
