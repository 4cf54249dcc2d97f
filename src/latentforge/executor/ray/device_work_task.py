"""The device half of the caption and near-duplicate passes (pipeline/device_work.py) on a Ray cluster: one task on
one GPU of the cluster (a CPU slot for a CPU build), before the plan pass and any worker. The task streams each
batch's results back as it finishes them (a Ray generator task); the driver records them in its own records, as it
records the plan pass's book, so nodes that keep the build's records in separate node-local folders need none of
them, and an interrupted pass keeps the batches the driver received."""

from __future__ import annotations

from typing import Any, Callable, Iterator

from ...errors import LatentforgeError, StopRequested
from ...pipeline.device_work import BatchResults, DeviceWork
from .session import BUILD_TOKEN_ENV

_POLL_SECONDS = 0.2


def batches_here(work: DeviceWork, device: str) -> Iterator[BatchResults]:
    """work.batches, its error as a plain LatentforgeError: the project's errors with extra arguments do not pickle
    back from a Ray worker."""
    try:
        yield from work.batches(device)
    except LatentforgeError as error:
        raise LatentforgeError(str(error)) from None


def ray_device_work(ray: Any, work: DeviceWork, on_batch: Callable[[BatchResults], None], token: str, device: str,
                    num_gpus: int, stopped: Callable[[], int | None]) -> None:
    """Run `work` in a Ray task with `num_gpus` GPUs, `device` as the task sees it (its worker process exits after
    it, freeing the GPU); `on_batch` gets each batch's results on this thread. `stopped`: the signal that should
    end the build (SIGTERM/SIGINT noted while Ray runs), checked between waits."""
    task = ray.remote(num_gpus=num_gpus, num_cpus=1, max_calls=1, max_retries=0,
                      runtime_env={"env_vars": {BUILD_TOKEN_ENV: token}})(batches_here)
    results = task.remote(work, device)
    try:
        while True:
            signum = stopped()
            if signum is not None:
                raise StopRequested(signum)
            ready, _ = ray.wait([results], timeout=_POLL_SECONDS)
            if not ready:
                continue
            try:
                ref = next(results)
            except StopIteration:
                return
            on_batch(ray.get(ref))
    except ray.exceptions.RayError as error:
        cause = getattr(error, "cause", None) or error
        raise LatentforgeError(f"the build's {work.what} failed on the Ray cluster: {cause}") from None
    finally:
        ray.cancel(results, force=True)  # a task of a driver that stays connected must not run on after an error
