"""Whether a device named in a config or on the command line exists here, asked before any work starts."""

from __future__ import annotations

import re

from .errors import ConfigError

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


def default_device() -> str:
    """Where a verb that encodes or decodes runs when not told: the first GPU when torch sees one, else the CPU."""
    return "cpu" if no_gpu_reason() is not None else "cuda"


def device_note(device: str) -> str:
    """Which device a verb chose and why, for its output."""
    reason = no_gpu_reason() if device == "cpu" else None
    return f"on {device}" + (f" ({reason})" if reason else "")


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
