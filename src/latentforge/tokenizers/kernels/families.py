"""The kernel families offered as named plans, in the order a book's key names them: cuDNN's engine plans, Triton's
and CUTLASS's causal convs. Adding or dropping a family is one module (a ConvKernel, conv_kernel.py) and one line
here; nothing outside this package names a family.
"""

from __future__ import annotations

import re

import torch

from . import cudnn_graph, triton_conv
from .conv_kernel import ConvKernel
from .cutlass import conv as cutlass_conv

FAMILIES: tuple[ConvKernel, ...] = (cudnn_graph.FAMILY, triton_conv.FAMILY, cutlass_conv.FAMILY)


def family_of(plan: str) -> ConvKernel | None:
    """The family a recorded plan name belongs to (None: no family here names it)."""
    return next((family for family in FAMILIES if family.owns(plan)), None)


def plans_key(device: torch.device) -> str:
    """The environment a plan name is valid in, as a file-name-safe key: the GPU model, then each family's version
    on it (cuDNN with its frontend, Triton, and on an sm_90 GPU that can build CUTLASS's library its version).
    Families compile their plans, and a machine without one must not be handed a book that names its kernels."""
    name = re.sub(r"[^A-Za-z0-9]+", "-", torch.cuda.get_device_name(device)).strip("-")
    parts = [f"{family.family}{version}" for family in FAMILIES if (version := family.version(device))]
    return "_".join([name, *parts])


def kernel_environment(device: torch.device) -> dict[str, str]:
    """{record key: version} of every family on `device`, "none" where one is absent (the environment record's
    part that says which kernels a build could run)."""
    return {family.environment_key: family.environment_version(device) for family in FAMILIES}
