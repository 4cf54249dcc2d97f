"""A Wan build in bf16 on a CPU without bf16 instructions (~55x slower than fp32) is refused in the pre-flight,
before the checkpoint is read, unless tokenizer.allow_slow_cpu_bf16 is set; the decision reads the CPU's flags."""

from __future__ import annotations

import platform

import pytest

from helpers.exec_world import build_args
from latentforge.tokenizers.cpu_bf16 import cpu_flags, has_bf16_instructions

SKYLAKE = frozenset({"avx2", "avx512f", "avx512bw", "avx512vl", "avx512_vnni"})  # AVX512, no bf16
CASES = [
    ("x86_64", frozenset({"sse4_2", "avx2", "fma"}), False),
    ("x86_64", SKYLAKE, False),
    ("x86_64", SKYLAKE | {"avx512_bf16"}, True),  # Cooper Lake, Zen 4
    ("x86_64", SKYLAKE | {"amx_bf16", "amx_tile"}, True),  # Sapphire Rapids
    ("AMD64", frozenset({"avx512_bf16"}), True),
    ("aarch64", frozenset({"fp", "asimd", "sve"}), False),  # Graviton2-like
    ("aarch64", frozenset({"fp", "asimd", "sve", "bf16", "i8mm"}), True),  # Graviton3, Grace
    ("x86_64", None, None),  # no /proc/cpuinfo: not refused
    ("riscv64", frozenset({"v"}), None),
]


@pytest.mark.parametrize("machine, flags, expected", CASES)
def test_the_decision_reads_the_bf16_flags(machine, flags, expected):
    assert has_bf16_instructions(machine, flags) is expected


def test_cpu_flags_reads_the_first_cpu_of_x86_and_arm_cpuinfo(tmp_path):
    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512_bf16\n\nprocessor\t: 1\nflags\t\t: fpu\n")
    assert cpu_flags(x86) == {"fpu", "avx2", "avx512_bf16"}
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd bf16\n")
    assert cpu_flags(arm) == {"fp", "asimd", "bf16"}
    assert cpu_flags(tmp_path / "missing") is None


lacks_bf16 = pytest.mark.skipif(has_bf16_instructions(platform.machine(), cpu_flags()) is not False,
                                reason="this CPU has bf16 instructions (or they cannot be read)")


@pytest.fixture
def wan(tmp_path):
    """build_args for wan2.1 on the CPU with a checkpoint that is no state dict: reading it fails with its own
    error, so a refusal naming bf16 proves the check ran before the checkpoint was read."""
    checkpoint = tmp_path / "Wan2.1_VAE.pth"
    checkpoint.write_bytes(b"not a checkpoint")
    root = tmp_path / "cache"
    return root, lambda *extra: build_args(tmp_path / "t.csv", root, "--tokenizer", "wan2.1", "--device", "cpu",
                                           "--tokenizer-checkpoint", str(checkpoint), *extra)


@lacks_bf16
@pytest.mark.parametrize("precision", ["bf16", "cosmos-bf16"])
def test_bf16_on_a_cpu_without_bf16_is_refused_before_the_checkpoint_is_read(cli, wan, precision):
    root, args = wan
    for verb in ("build", "scan"):
        done = cli([verb, *args("--precision", precision)[1:]])
        assert done.returncode == 2, done.stderr
        message = " ".join(done.stderr.split())
        assert message.startswith(f"config error: tokenizer.precision='{precision}' on the CPU: this CPU"), message
        assert "about 55x slower than fp32; use --precision fp32" in message
        assert "--set tokenizer.allow_slow_cpu_bf16=true" in message and "Traceback" not in message
    assert not root.exists()


@lacks_bf16
def test_the_opt_in_and_fp32_go_on_to_the_checkpoint(cli, wan):
    _, args = wan
    for extra in (("--precision", "bf16", "--set", "tokenizer.allow_slow_cpu_bf16=true"), ("--precision", "fp32")):
        done = cli(args(*extra))
        assert done.returncode == 1 and "is not a plain state dict" in done.stderr, done.stderr
