"""Which devices exist here, and how the host waits for one.

Whether a device named in a config or on the command line exists, asked before any work starts; and how the
host waits for a device, copies to it without waiting, and times the device's work: sleeping, never spinning a
core. torch is imported only where used, so checking a config's device name does not load it."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from .errors import ConfigError

if TYPE_CHECKING:
    import torch

DEVICE_PATTERN = re.compile(r"^(cpu|cuda(:\d+)?)$")
CPU_ADVICE = "use --device cpu (add --procs N for N encoder processes on the CPU)"


def check_device_name(device: str, key: str) -> None:
    if not DEVICE_PATTERN.match(device):
        raise ConfigError(f"{key}={device!r}; allowed: cpu, cuda, cuda:N")


def no_gpu_reason() -> str | None:
    """Why torch sees no CUDA GPU here, or None when it sees at least one."""
    import torch

    if torch.version.cuda is None:
        return f"this torch ({torch.__version__}) is built without CUDA"
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        return "torch sees no CUDA GPU (check the driver, nvidia-smi and CUDA_VISIBLE_DEVICES)"
    return None


AUTO = "auto"  # the --device of a verb that encodes or decodes, when not told: see choose_device


def choose_device(requested: str | None = AUTO, gpu_missing: Callable[[], str | None] | None = None) -> str:
    """Where a verb that encodes or decodes runs: `requested` when it names a device (`cpu` wins on a GPU host);
    for `auto` or None, the first GPU when `gpu_missing()` (default no_gpu_reason) gives no reason, else the CPU.
    torch is asked only for `auto`."""
    if requested not in (None, AUTO):
        return requested
    return "cpu" if (gpu_missing or no_gpu_reason)() is not None else "cuda"


def default_device() -> str:
    """choose_device's pick when not told: the first GPU when torch sees one, else the CPU."""
    return choose_device(AUTO)


def device_note(device: str) -> str:
    """Which device a verb chose and why, for its output."""
    reason = no_gpu_reason() if device == "cpu" else None
    return f"on {device}" + (f" ({reason})" if reason else "")


def cpu_build_notice(device: str) -> str | None:
    """For a build encoding on `device`: a note when that is the CPU on a host where torch sees a GPU (a build
    encodes on run.device, cpu unless told, where verify and preview take the GPU by themselves); else None."""
    if device != "cpu" or no_gpu_reason() is not None:
        return None
    import torch

    return (f"this build encodes on the CPU (run.device=cpu, the default) although torch sees "
            f"{torch.cuda.device_count()} CUDA GPU(s) here; add --gpus all (one encoder process per GPU) or "
            "--device cuda to encode there")


def check_device_present(device: str, key: str) -> None:
    """ConfigError naming the key, the value, why it is absent and what to use instead."""
    check_device_name(device, key)
    if device == "cpu":
        return
    reason = no_gpu_reason()
    if reason is not None:
        raise ConfigError(f"{key}={device!r}, but {reason}; {CPU_ADVICE}")
    import torch

    index = int(device.split(":")[1]) if ":" in device else 0
    if index >= torch.cuda.device_count():
        raise ConfigError(f"{key}={device!r}, but this machine shows {torch.cuda.device_count()} GPU(s) (indices "
                          "within CUDA_VISIBLE_DEVICES); give an index below that")


def wait_for_device(device: torch.device) -> None:
    """Return once everything queued on `device`'s current stream is done, sleeping meanwhile: the default wait
    (and a copy to pageable memory) spins a core for as long as the device works (seconds per unit)."""
    if device.type == "cuda":
        import torch

        done = torch.cuda.Event(blocking=True)
        done.record(torch.cuda.current_stream(device))
        done.synchronize()


def copy_to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A small host tensor on `device`, without the host waiting for the device's queue: on CUDA the copy starts
    from page-locked memory (a copy from pageable memory waits for everything queued before it)."""
    if device.type == "cuda":
        tensor = tensor.pin_memory()
    return tensor.to(device, non_blocking=True)


def copy_to_host_soon(tensor: torch.Tensor) -> Callable[[], torch.Tensor]:
    """Start copying `tensor` to page-locked host memory and return a function that waits for that copy alone
    (everything queued before it, not what is queued after) and gives the host tensor, sleeping while it waits.
    Queue the device's next work between the two and the device stays busy while the host waits and then works
    on the copy; `.cpu()` instead waits for all queued work, and the device idles while the host catches up.
    A host tensor is given back as it is."""
    if tensor.device.type != "cuda":
        return lambda: tensor
    import torch

    host = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
    host.copy_(tensor, non_blocking=True)
    copied = torch.cuda.Event(blocking=True)
    copied.record(torch.cuda.current_stream(tensor.device))

    def wait() -> torch.Tensor:
        copied.synchronize()
        return host

    return wait


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
        import torch

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


@contextlib.contextmanager
def tf32_off() -> Iterator[None]:
    """Both TF32 switches off (fp32 convolutions and matmuls stay fp32 on Ampere and later), restored afterwards:
    what an fp32 encode needs to equal its reference."""
    import torch

    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
