"""How the host waits for a device, copies to it without waiting, and times the device's work: sleeping,
never spinning a core."""

from __future__ import annotations

import time

import torch


def wait_for_device(device: torch.device) -> None:
    """Return once everything queued on `device`'s current stream is done, sleeping meanwhile: the default wait
    (and a copy to pageable memory) spins a core for as long as the device works (seconds per unit)."""
    if device.type == "cuda":
        done = torch.cuda.Event(blocking=True)
        done.record(torch.cuda.current_stream(device))
        done.synchronize()


def copy_to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A small host tensor on `device`, without the host waiting for the device's queue: on CUDA the copy starts
    from page-locked memory (a copy from pageable memory waits for everything queued before it)."""
    if device.type == "cuda":
        tensor = tensor.pin_memory()
    return tensor.to(device, non_blocking=True)


class DeviceClock:
    """The device's time between two points of its queue: the start at creation, `stop()` later, `seconds()` once
    the device has passed the stop (after a wait for it). On the CPU, where every step runs in order, wall time."""

    def __init__(self, device: torch.device):
        self._cuda = device.type == "cuda"
        self._start = self._mark()
        self._end: float | torch.cuda.Event | None = None

    def _mark(self) -> float | torch.cuda.Event:
        if not self._cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def stop(self) -> DeviceClock:
        self._end = self._mark()
        return self

    def seconds(self) -> float:
        if self._end is None:
            raise RuntimeError("DeviceClock.seconds() before stop()")
        if self._cuda:  # the stop may still be in flight (a clock read right after its stream's own wait)
            self._end.synchronize()
            return self._start.elapsed_time(self._end) / 1e3
        return self._end - self._start
