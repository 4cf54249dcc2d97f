"""What decides whether a re-encode can be bit-exact: the device model and the software that encoded."""

from __future__ import annotations

import platform
from typing import Iterator

import torch

from ..version import __version__


def environment_record(device: str | torch.device) -> dict[str, str]:
    """Device model and software versions (no host names, no time)."""
    device = torch.device(device)
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        name = next((line.split(":", 1)[1].strip() for line in _cpuinfo() if line.startswith("model name")),
                    platform.processor() or platform.machine())
    return {"device_type": device.type, "device_name": name, "torch": torch.__version__, "latentforge": __version__}


def _cpuinfo() -> Iterator[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            yield from handle
    except OSError:
        return
