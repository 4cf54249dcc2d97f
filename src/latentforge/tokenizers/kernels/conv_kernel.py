"""What a family of convolution kernels declares to be offered as named plans (`ConvKernel`), and the call they
all take: `(x, weight, bias, stride, padding)` as F.conv3d / F.conv2d take it.

A family names its plans `<family><version>:<config>` (cuDNN's engine plans keep cuDNN's own names, `eng...`),
so a book can say which family and which version of it chose each convolution. families.py lists the families;
planned_convs.PlannedConvs times every family's candidates for a convolution it has not seen and replays the
recorded name through the family that owns it.
"""

from __future__ import annotations

from typing import Callable, Protocol

import torch
import torch.nn.functional as F

# A chosen plan, run on the operands of one call: (x, weight, bias) -> output
Runner = Callable[[torch.Tensor, torch.Tensor, "torch.Tensor | None"], torch.Tensor]


class ConvKernel(Protocol):
    """A family of convolution kernels offered beside PyTorch's own call."""

    family: str  # its name: the prefix of its plan names and of its part of a book's key
    environment_key: str  # the key of an environment record (pipeline/environment.py) that holds its version
    requirements: str  # what a machine needs to run its plans, for the message where one is missing

    def version(self, device: torch.device) -> str | None:
        """The version that decides the bits its plans compute on `device`; None where it cannot run there."""

    def environment_version(self, device: torch.device) -> str:
        """Its version as an environment record holds it ("none" where absent)."""

    def available(self, device: torch.device) -> bool:
        """Whether its plans can run on `device` (version() is not None)."""

    def owns(self, plan: str) -> bool:
        """Whether a recorded plan name is one of this family's."""

    def covers(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, stride, padding) -> bool:
        """Whether it computes this call here (device, dtype, layout, shapes)."""

    def candidates(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, stride, padding,
                   prepared: dict) -> dict[str, Runner]:
        """{plan name: runner} of the configs a plan pass times for a covered call (those that cannot be made
        here left out). `prepared`: a dict the caller keeps as long as the runners live, where a family may keep
        weights in the layout its kernels read, made once per weight."""

    def runner(self, plan: str, key: str, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, stride,
               padding, prepared: dict) -> Runner:
        """The runner of a recorded plan for the call of signature `key`; RuntimeError (or ConfigError, with the
        fix) where this machine cannot run it exactly as recorded."""


def as_tuple(value, dims: int) -> tuple[int, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * dims


def signature(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, stride, padding) -> str:
    """Everything that selects a convolution's kernels; equal signatures can share a plan."""
    return (f"x{list(x.shape)}:{list(x.stride())} w{list(weight.shape)}:{list(weight.stride())} "
            f"s{list(as_tuple(stride, x.dim() - 2))} p{list(as_tuple(padding, x.dim() - 2))} "
            f"bias={bias is not None} {str(x.dtype).removeprefix('torch.')}")


def torch_conv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, stride, padding) -> torch.Tensor:
    """PyTorch's call: cuDNN's heuristics pick the kernel on CUDA, the CPU kernels elsewhere."""
    conv = F.conv3d if x.dim() == 5 else F.conv2d
    return conv(x, weight, bias, stride, padding)


def conv_output(x: torch.Tensor, weight: torch.Tensor, stride, padding) -> torch.Tensor:
    """An empty output of the call, channels-last."""
    dims = x.dim() - 2
    strides, pads = as_tuple(stride, dims), as_tuple(padding, dims)
    size = [(x.shape[2 + d] + 2 * pads[d] - weight.shape[2 + d]) // strides[d] + 1 for d in range(dims)]
    layout = torch.channels_last_3d if dims == 3 else torch.channels_last
    return torch.empty((x.shape[0], weight.shape[0], *size), dtype=x.dtype, device=x.device, memory_format=layout)
