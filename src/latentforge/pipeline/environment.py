"""What decides whether a re-encode can give the same bits: the device model and the software that encoded.
On the CPU that includes the vector width torch's kernels use (`cpu_capability`: AVX2 or AVX512 on x86-64): two
CPUs of the same name but another width, or ATEN_CPU_CAPABILITY set otherwise, give other float bits.

Recorded per unit of work and in cache_config.json (`encoded_by`); deep verify compares bit for bit only where
the verifier's record equals the cache's.
"""

from __future__ import annotations

import ctypes
import os
import platform
from typing import Iterator, Mapping

import torch

from ..version import __version__


def environment_record(device: str | torch.device, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Device model and software versions (no host names, no time). On CUDA also the CUDA runtime, the driver's
    CUDA version and cuDNN, which pick and build the kernels. `environ`: the variables of the process the record
    is for (default this one's), where an encoder process will set some before its model loads."""
    device = torch.device(device)
    environ = os.environ if environ is None else environ
    record = {"device_type": device.type}
    if device.type == "cuda":
        record["device_name"] = torch.cuda.get_device_name(device)
        record["cuda"] = str(torch.version.cuda)
        record["cuda_driver"] = _driver_cuda_version()
        record["cudnn"] = str(torch.backends.cudnn.version())
        # PyTorch asks cuDNN's heuristics in mode B instead of A when this is set (the bf16 fast path sets it
        # before its first convolution): other kernels, other bits
        mode_b = environ.get("TORCH_CUDNN_USE_HEURISTIC_MODE_B", "").lower() in ("1", "true", "yes", "on")
        record["cudnn_heuristics"] = "B" if mode_b else "A"
        # the versions of the kernel families that compile or build the recorded plans (and Triton's fused kernels);
        # imported here: Triton is slow to import, and a CPU process has no use for it
        from ..tokenizers.kernels.families import kernel_environment

        record.update(kernel_environment(device))
    else:
        record["device_name"] = next((line.split(":", 1)[1].strip() for line in _cpuinfo()
                                      if line.startswith("model name")), platform.processor() or platform.machine())
        # ranks inherit this process's ATEN_CPU_CAPABILITY, so this process's width is theirs
        record["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    # str(): torch.__version__ is a str subclass that unpickles by importing torch (in the Ray queue actor, which
    # gets this record with every staged unit and has no other use for torch)
    record.update({"torch": str(torch.__version__), "latentforge": __version__})
    return record


def _driver_cuda_version() -> str:
    """The CUDA version the installed driver supports (cuDriverGetVersion: 13000 -> "13.0"), or "unknown"."""
    try:
        version = ctypes.c_int()
        if ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(version)) != 0:
            return "unknown"
    except OSError:
        return "unknown"
    return f"{version.value // 1000}.{version.value % 1000 // 10}"


def _cpuinfo() -> Iterator[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            yield from handle
    except OSError:
        return
