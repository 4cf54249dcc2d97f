"""The probe of a plan (executor/parallel_probe.py) on a Ray cluster: one CPU task per video, the windows of one video
in one task so it is decoded once, placed on the cluster's workers. The sources are where the workers read them
(shared storage, as for the units), and the driver may be a small machine: decoding every video from its start is
the build's largest CPU cost before the units. The driver gets each video's results as its task finishes, counts
them and returns them in the plan's order, which are those of the probe in one process, whatever the split."""

from __future__ import annotations

from typing import Any, Callable

from ...config import BuildConfig
from ...config.checks import parse_workers
from ...errors import LatentforgeError, StopRequested
from ...pipeline.probe import ProbeResult, probe_samples
from ...progress import Advance
from ...records import Reject, Sample
from ..parallel_probe import Probed, by_video, in_plan_order
from .session import BUILD_TOKEN_ENV

_POLL_SECONDS = 0.2


def probe_here(samples: list[Sample], config: BuildConfig) -> list[tuple[int, ProbeResult | Reject]]:
    """probe_samples, its error as a plain LatentforgeError: the project's errors with extra arguments do not pickle
    back from a Ray worker."""
    try:
        return probe_samples(samples, config)
    except LatentforgeError as error:
        raise LatentforgeError(str(error)) from None


def ray_probe(ray: Any, samples: list[Sample], config: BuildConfig, advance: Advance, token: str,
              stopped: Callable[[], int | None]) -> Probed:
    """Probe `samples` in Ray tasks of one CPU, one per video: run.probe_workers=N of them at once, or under auto
    as many as the cluster has CPU slots for (twice that many handed to Ray, so no slot waits on the driver). A task
    whose worker dies is retried by Ray (the probe only reads); one that raises stops the build with its error.
    `stopped`: the signal that should end the build (SIGTERM/SIGINT noted while Ray runs), checked between waits."""
    most = parse_workers(config.run.probe_workers, "run.probe_workers", least=1) \
        or max(1, 2 * int(ray.cluster_resources().get("CPU", 0)))
    task = ray.remote(num_cpus=1, runtime_env={"env_vars": {BUILD_TOKEN_ENV: token}})(probe_here)
    shared = ray.put(config)  # once in the object store, not pickled again with every task
    waiting = by_video(samples)[::-1]
    pending: dict[Any, int] = {}  # task -> how many samples it probes
    probes: Probed = {}
    try:
        while waiting or pending:
            while waiting and len(pending) < most:
                group = waiting.pop()
                pending[task.remote(group, shared)] = len(group)
            signum = stopped()
            if signum is not None:
                raise StopRequested(signum)
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=_POLL_SECONDS)
            if ready:  # and every other one done by now
                ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0)
            for ref in ready:
                probes.update(ray.get(ref))
                advance(pending.pop(ref))
    except ray.exceptions.RayError as error:
        cause = getattr(error, "cause", None) or error
        raise LatentforgeError(f"the build's probe failed on the Ray cluster: {cause}") from None
    finally:
        for ref in pending:  # a driver that stays connected must not leave tasks running after an error
            ray.cancel(ref, force=True)
    return in_plan_order(samples, probes)
