"""Operands and references for the GPU tests of the encoder's causal 3x3x3 conv kernels (Triton, CUTLASS)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def operands(channels: int, out_channels: int, frames: int = 5, height: int = 20, width: int = 36, batch: int = 1):
    """A causal conv's padded input (frames + 2, channels-last 3D) and weight, bf16, on the GPU; 720 positions a
    frame, not a multiple of the kernels' 128-row tiles."""
    generator = torch.Generator(device="cpu").manual_seed(channels * 1000 + out_channels)
    x = torch.randn(batch, channels, frames + 2, height, width, generator=generator)
    w = torch.randn(out_channels, channels, 3, 3, 3, generator=generator) / (27 * channels) ** 0.5
    x = x.to("cuda", torch.bfloat16).contiguous(memory_format=torch.channels_last_3d)
    return x, w.to("cuda", torch.bfloat16).contiguous(memory_format=torch.channels_last_3d)


def fp32_conv(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """cuDNN's fp32 conv of the same bf16 operands, TF32 off: the reference a bf16 kernel rounds once."""
    with torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=True, allow_tf32=False):
        return F.conv3d(x.float(), w.float(), None, padding=(0, 1, 1))


def rel_l2(value: torch.Tensor, reference: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(value.float() - reference) / torch.linalg.vector_norm(reference))


def check_replay_and_tuning(monkeypatch, x, w, configs, plan_name, direct, owner, attribute: str, config_arg: int):
    """A one-entry book naming each config's plan (`plan_name(config)`) replays exactly the kernel called directly
    (`direct(config)`), and tuning an empty book calls `owner.attribute` (the kernel; its argument `config_arg` is
    the config) for every config and records a plan whose replay repeats the tuned output."""
    from latentforge.tokenizers.kernels.conv_kernel import signature
    from latentforge.tokenizers.kernels.plan_book import PlanBook
    from latentforge.tokenizers.kernels.planned_convs import PlannedConvs

    key = signature(x, w, None, 1, (0, 1, 1))
    for config in configs:
        replayed = PlannedConvs(PlanBook(entries={key: plan_name(config)}))(x, w, None, 1, (0, 1, 1))
        assert torch.equal(replayed, direct(config)), f"{plan_name(config)}: the replay is not the kernel's output"

    timed = []
    original = getattr(owner, attribute)

    def spy(*args):
        timed.append(args[config_arg])
        return original(*args)

    monkeypatch.setattr(owner, attribute, spy)
    book = PlanBook()
    out = PlannedConvs(book)(x, w, None, 1, (0, 1, 1))
    assert set(configs) <= set(timed), f"tuning did not time every candidate: {sorted(map(str, timed))}"
    assert torch.equal(PlannedConvs(PlanBook(entries={key: book.entries()[key]}))(x, w, None, 1, (0, 1, 1)), out)
