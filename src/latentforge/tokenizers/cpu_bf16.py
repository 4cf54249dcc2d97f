"""Whether this CPU computes bf16 convolutions in hardware, and the pre-flight refusal of a bf16 encode on a CPU that
does not: there PyTorch (oneDNN) converts every value to fp32 and back, and a Wan2.1 convolution runs about 55x
slower than in fp32 (a 96-channel 3x34x66 conv3d: 3.77 s against 0.070 s on two AVX2 cores), so a tiny build that
takes seconds in fp32 takes most of an hour.

torch.backends.cpu.get_cpu_capability() names the vector width PyTorch's own kernels use (AVX2, AVX512, SVE256), not
bf16 support (an AVX512 Skylake has none), so the decision reads the instruction-set flags the kernel lists in
/proc/cpuinfo: avx512_bf16 or amx_bf16 on x86, bf16 on ARM. Where those cannot be read the CPU is given the benefit
of the doubt."""

from __future__ import annotations

import platform
from pathlib import Path

import torch

from ..errors import ConfigError

SLOWDOWN = 55  # bf16 / fp32 time of a Wan2.1 conv3d on a CPU without bf16 instructions (docs/tokenizers.md)
X86_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
ARM_BF16_FLAG = "bf16"
X86 = ("x86_64", "amd64", "i386", "i686")
ARM = ("aarch64", "arm64")
CPU_BF16_PRECISIONS = ("bf16", "cosmos-bf16")


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str] | None:
    """The instruction-set flags of the first CPU in /proc/cpuinfo (x86 "flags", ARM "Features"); None where that
    file is missing or lists none (macOS, Windows)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return None


def has_bf16_instructions(machine: str, flags: frozenset[str] | None) -> bool | None:
    """True when the CPU computes bf16 in hardware, False when its flags show it does not, None when unknown (no
    flags, or an architecture this does not know)."""
    if flags is None:
        return None
    machine = machine.lower()
    if machine in X86:
        return any(flag in flags for flag in X86_BF16_FLAGS)
    if machine in ARM:
        return ARM_BF16_FLAG in flags
    return None


def check_cpu_bf16(precision: str, device: str, allow_slow: bool) -> None:
    """Pre-flight: refuse a bf16 encode on a CPU without bf16 instructions, unless tokenizer.allow_slow_cpu_bf16."""
    if precision not in CPU_BF16_PRECISIONS or torch.device(device).type != "cpu" or allow_slow:
        return
    if has_bf16_instructions(platform.machine(), cpu_flags()) is not False:
        return
    wanted = " or ".join(X86_BF16_FLAGS) if platform.machine().lower() in X86 else ARM_BF16_FLAG
    raise ConfigError(
        f"tokenizer.precision={precision!r} on the CPU: this CPU (PyTorch kernels: "
        f"{torch.backends.cpu.get_cpu_capability()}) has no bf16 instructions ({wanted}), so bf16 convolutions run "
        f"about {SLOWDOWN}x slower than fp32; use --precision fp32 (its latents differ from bf16's: another cache), "
        "encode on a GPU, or accept the wait with --set tokenizer.allow_slow_cpu_bf16=true")
