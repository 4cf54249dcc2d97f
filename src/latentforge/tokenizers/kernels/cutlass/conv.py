"""CUTLASS's Hopper implicit GEMM for the fast encoder's causal 3x3x3 convs, offered as named plans.

The kernels (cutlass/conv3d_sm90.cu) take the call triton_conv.py describes — `padded` [B, C, T+2, H, W] bf16
channels-last 3-D, weight [Cout, C, 3, 3, 3] channels-last 3-D, padding (0, 1, 1), no bias — with tiles whose N is
96 or 192 output channels (Hopper's wgmma takes N = 96, which Triton's power-of-two shapes cannot), TMA im2col
loads that zero-fill the spatial border, fp32 accumulation in a fixed K order and no split-K: a config gives the
same bits in every process. The library is built on first use (cutlass_build.py) and called through ctypes.

planned_convs.PlannedConvs times `candidates()` beside cuDNN's plans and Triton's when `covers()` a call, and records
the winner as `cutlass<CUTLASS version>:<config>`; a book that names one replays it only where the same CUTLASS
version builds the library.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import torch

from ....errors import ConfigError
from . import build as cutlass_build

PLAN_PREFIX = "cutlass"
# The configs timed per output width: tiles of 128 (or 256) positions x all output channels, K steps of 32 at 96
# channels (steps of 64 would zero-fill a third of every channel block) and of 64 at 192, clusters of 1 to 4.
CANDIDATES = {96: ("m128_n96_k32_c2", "m256_n96_k32_c1", "m256_n96_k32_c2"),
              192: ("m128_n192_k64_c1", "m128_n192_k64_c2", "m128_n192_k64_c4")}
ERRORS = {1: "the config cannot run this problem (can_implement)", 2: "workspace too small",
          3: "initialize failed", 4: "the launch failed", 5: "a CUDA error after the launch"}


def candidates(channels: int, out_channels: int) -> tuple[str, ...]:
    return CANDIDATES.get(out_channels, ()) if channels % 8 == 0 else ()


def plan_name(label: str, version: str) -> str:
    return f"{PLAN_PREFIX}{version}:{label}"


def is_plan_name(name: str) -> bool:
    return name.startswith(PLAN_PREFIX)


def config_of(name: str, version: str) -> str:
    """The config label of a recorded plan name; RuntimeError when another CUTLASS version recorded it."""
    recorded, _, label = name.removeprefix(PLAN_PREFIX).partition(":")
    if recorded != version:
        raise RuntimeError(f"the recorded plan {name!r} was timed with CUTLASS {recorded}, and this machine builds "
                           f"with CUTLASS {version}, which may compile the kernel to other bits (use CUTLASS "
                           f"{recorded}, or start over with --overwrite)")
    return label


def covers(x: torch.Tensor, weight: torch.Tensor, bias, stride, padding) -> bool:
    """Whether a conv call is one these kernels compute, on an sm_90 GPU, bf16 (whether the library can be built
    here is `kernels()`'s question)."""
    if not x.is_cuda or x.dim() != 5 or x.dtype != torch.bfloat16 or weight.dtype != torch.bfloat16:
        return False
    strides = (stride,) * 3 if isinstance(stride, int) else tuple(stride)
    pads = (padding,) * 3 if isinstance(padding, int) else tuple(padding)
    return (torch.cuda.get_device_capability(x.device) == (9, 0) and bias is None
            and tuple(weight.shape[2:]) == (3, 3, 3) and strides == (1, 1, 1) and pads == (0, 1, 1)
            and x.is_contiguous(memory_format=torch.channels_last_3d)
            and weight.is_contiguous(memory_format=torch.channels_last_3d)
            and bool(candidates(x.shape[1], weight.shape[0])))


class CutlassKernels:
    """The built library: conv(label, x, weight) -> out."""

    def __init__(self, path: Path, version: str):
        self.version = version
        self.lib = lib = ctypes.CDLL(str(path))
        lib.lf_conv3d_config_count.restype = ctypes.c_int
        lib.lf_conv3d_config_name.restype = ctypes.c_char_p
        lib.lf_conv3d_config_name.argtypes = [ctypes.c_int]
        ints = [ctypes.c_int] * 6
        lib.lf_conv3d_workspace.argtypes = [ctypes.c_int, *ints, ctypes.POINTER(ctypes.c_size_t)]
        lib.lf_conv3d_run.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, *ints,
                                      ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        self.labels = [lib.lf_conv3d_config_name(i).decode() for i in range(lib.lf_conv3d_config_count())]

    def conv(self, label: str, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        config = self.labels.index(label)
        batch, channels, frames, height, width = x.shape
        dims = (batch, frames, height, width, channels, weight.shape[0])
        size = ctypes.c_size_t(0)
        check(self.lib.lf_conv3d_workspace(config, *dims, ctypes.byref(size)), label)
        out = torch.empty(batch, weight.shape[0], frames - 2, height, width, device=x.device, dtype=x.dtype,
                          memory_format=torch.channels_last_3d)
        workspace = torch.empty(max(size.value, 1), device=x.device, dtype=torch.uint8)
        check(self.lib.lf_conv3d_run(config, x.data_ptr(), weight.data_ptr(), out.data_ptr(), *dims,
                                     workspace.data_ptr(), size.value,
                                     torch.cuda.current_stream(x.device).cuda_stream), label)
        return out


def check(code: int, label: str) -> None:
    if code:
        raise RuntimeError(f"CUTLASS conv {label}: {ERRORS.get(code, f'error {code}')}")


@functools.cache
def toolchain() -> cutlass_build.Toolchain | None:
    """This machine's nvcc and CUTLASS headers, or None where either is missing."""
    try:
        return cutlass_build.find_toolchain()
    except ConfigError:
        return None


@functools.cache
def kernels() -> CutlassKernels | None:
    """The library of this machine (built now if the cache lacks it), or None where nvcc or CUTLASS's headers are
    missing (no CUTLASS plan is then timed; a book that records one says what to install)."""
    found = toolchain()
    return CutlassKernels(cutlass_build.library(found), found.cutlass_version) if found else None


def version_on(device: torch.device) -> str | None:
    """The CUTLASS version the plans of `device` are built with: None off sm_90 GPUs, or where nvcc or CUTLASS's
    headers are missing."""
    found = toolchain() if torch.cuda.get_device_capability(device) == (9, 0) else None
    return found.cutlass_version if found else None


def require_kernels(name: str) -> CutlassKernels:
    found = kernels()
    if found is None:
        raise ConfigError(f"the recorded plan {name!r} is a CUTLASS kernel, and this machine cannot build it; "
                          f"{cutlass_build.FIX}")
    return found


class CutlassConvKernels:
    """The CUTLASS family (ConvKernel): bf16 causal 3x3x3 convs on an sm_90 GPU where the library builds."""

    family = PLAN_PREFIX
    environment_key = "cutlass"
    requirements = cutlass_build.FIX

    def version(self, device: torch.device) -> str | None:
        return version_on(device) if torch.device(device).type == "cuda" else None

    def environment_version(self, device: torch.device) -> str:
        return self.version(device) or "none"

    def available(self, device: torch.device) -> bool:
        return self.version(device) is not None

    def owns(self, plan: str) -> bool:
        return is_plan_name(plan)

    def covers(self, x, weight, bias, stride, padding) -> bool:
        return covers(x, weight, bias, stride, padding)

    def candidates(self, x, weight, bias, stride, padding, prepared) -> dict:
        found = kernels()
        if found is None:
            return {}
        return {plan_name(label, found.version): _runner(found, label)
                for label in candidates(x.shape[1], weight.shape[0])}

    def runner(self, plan, key, x, weight, bias, stride, padding, prepared):
        if not covers(x, weight, bias, stride, padding):
            raise RuntimeError(f"the recorded plan {plan!r} for the convolution {key} is a CUTLASS kernel, "
                               "which runs bf16 causal convs on an sm_90 GPU only")
        found = require_kernels(plan)
        return _runner(found, config_of(plan, found.version))


def _runner(found: CutlassKernels, label: str):
    def run(x, weight, bias):
        return found.conv(label, x, weight)

    return run


FAMILY = CutlassConvKernels()
