"""The fast encoder's fused pass in Triton (tokenizers/wan/fused_norm.py: conv bias + residual add, rounded to bf16,
then RMS norm + SiLU in fp32, rounded once) against its eager branch (the same function on CPU tensors) and
against diffusers' WanRMS_norm in fp32 followed by torch's SiLU, on fresh random bf16 operands.

Each case is one way wan/fast_encoder.py calls it: the norm of a residual sum written into a causal conv's time-padded
buffer (batch 2, so the buffer's batch stride matters), a conv output with its pending bias, a plain norm, the
residual add and the bias alone in place, a single frame whose operands come in another layout, and a residual
add written into the interior of frames padded by a zero row and column (a spatial downsample's input: rows at
the padded buffer's strides). Channels are the Wan2.1 (96, 192, 384) and Wan2.2 (160, 320, 640) widths, none a
power of two, over row counts that are no multiple of the rows one program normalises. The kernel runs them in
equal power-of-two channel blocks (wan21_kernels.tiling); its other tiling, channels padded to a power of two and
masked, must agree with it.

Tolerance: the sum adds the same fp32 values in the same order, so it must be bit-identical; the norm reduces in
another order, so a bf16 value may round one step (2^-7 relative at most) the other way.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from latentforge.tokenizers.wan.fused_norm import add_rms_silu

ONE_BF16_STEP = 2**-7
SHAPE = (2, 3, 11, 19)  # batch, frames, height, width: 627 rows a sample, odd, so programs straddle samples
CASES = ("norm of a residual sum into a padded buffer", "norm of a conv output with its bias", "plain norm",
         "residual add in place", "bias in place", "single frame in another layout",
         "residual add into a zero-padded frame's interior")


@pytest.fixture(scope="module")
def device() -> torch.device:
    pytest.importorskip("triton", reason="Triton is not importable: the fused pass runs eagerly")
    return torch.device("cuda", 0)


def channels_last(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.contiguous(memory_format=torch.channels_last_3d)


def operands(case: str, channels: int, device: torch.device, seed: int) -> tuple[dict, torch.Tensor]:
    """add_rms_silu's arguments for one case in the layouts wan/fast_encoder.py gives them (random values), and the
    time-padded buffer whose frames from 2 on are norm_out."""
    generator = torch.Generator().manual_seed(seed)
    batch, frames, height, width = SHAPE
    if case == "single frame in another layout":
        frames = 1

    def activation(layout=channels_last) -> torch.Tensor:
        values = torch.randn(batch, channels, frames, height, width, generator=generator)
        return layout(values.to(torch.bfloat16)).to(device)

    gamma = torch.rand(channels, generator=generator) + 0.5  # as the VAEs' spread gammas
    bias = ((torch.rand(channels, generator=generator) - 0.5) * 0.2).to(device)
    padded = channels_last(torch.zeros(batch, channels, frames + 2, height, width, dtype=torch.bfloat16)).to(device)
    norm = {"weight": (gamma * channels**0.5).to(device), "norm_out": padded[:, :, 2:]}
    no_norm = {"weight": None, "norm_out": None}
    if case == "norm of a residual sum into a padded buffer":
        arguments = {"a": activation(), "b": activation(), "sum_out": activation(), "bias": bias, **norm}
    elif case == "norm of a conv output with its bias":
        arguments = {"a": activation(), "b": None, "sum_out": None, "bias": bias, **norm}
    elif case == "plain norm":
        arguments = {"a": activation(), "b": None, "sum_out": None, "bias": None, **norm}
    elif case in ("residual add in place", "bias in place"):
        a = activation()
        b = activation() if case == "residual add in place" else None
        arguments = {"a": a, "b": b, "sum_out": a, "bias": bias, **no_norm}
    elif case == "residual add into a zero-padded frame's interior":  # a spatial downsample's input
        framed = channels_last(torch.zeros(batch, channels, frames, height + 1, width + 1, dtype=torch.bfloat16))
        arguments = {"a": activation(), "b": activation(), "sum_out": framed.to(device)[:, :, :, :height, :width],
                     "bias": bias, **no_norm}
    else:  # a convolution over one frame can return another layout: copied in, and the sum copied back
        other = torch.Tensor.contiguous
        arguments = {"a": activation(other), "b": activation(other), "sum_out": activation(other), "bias": bias,
                     **norm}
    return arguments, padded


def on_cpu(arguments: dict) -> dict:
    """The same arguments as CPU copies (an in-place sum_out stays the same tensor as `a`)."""
    copies = {name: None if value is None else value.to("cpu", copy=True) for name, value in arguments.items()}
    if arguments["sum_out"] is not None and arguments["sum_out"] is arguments["a"]:
        copies["sum_out"] = copies["a"]
    return copies


def rounded_sum(arguments: dict) -> torch.Tensor:
    """a + bias + b in fp32, in that order, rounded to a's dtype: the sum as the kernel defines it."""
    total = arguments["a"].float()
    if arguments["bias"] is not None:
        total = total + arguments["bias"].view(1, -1, 1, 1, 1)
    if arguments["b"] is not None:
        total = total + arguments["b"].float()
    return total.to(arguments["a"].dtype)


def diffusers_norm(total: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """diffusers' WanRMS_norm over channels in fp32 (gamma = weight / sqrt(C)), then SiLU, rounded to bf16 once."""
    from diffusers.models.autoencoders.autoencoder_kl_wan import WanRMS_norm  # not at collection: a slow import

    channels = total.shape[1]
    norm = WanRMS_norm(channels, channel_first=True, images=False)
    with torch.no_grad():
        norm.gamma.copy_((weight / channels**0.5).view(-1, 1, 1, 1))
        return F.silu(norm(total.float())).to(torch.bfloat16)


def check_case(case: str, channels: int, device: torch.device, seed: int) -> None:
    arguments, padded = operands(case, channels, device, seed)
    eager = on_cpu(arguments)
    total = rounded_sum(eager)  # before anything is written in place
    add_rms_silu(**arguments)  # CUDA tensors: the Triton kernel
    add_rms_silu(**eager)  # CPU tensors: the eager branch
    if arguments["sum_out"] is not None:
        assert torch.equal(arguments["sum_out"].cpu(), total), "the rounded sum is not the fp32 sum rounded once"
        frame = arguments["sum_out"]._base
        if frame is not None and frame.shape[-1] > total.shape[-1]:  # written inside a padded frame
            assert not frame[:, :, :, -1].any() and not frame[..., -1].any(), "the kernel wrote into the padding"
    if arguments["norm_out"] is not None:
        ours = arguments["norm_out"].cpu().float()
        tolerance = {"rtol": ONE_BF16_STEP, "atol": 1e-30}
        torch.testing.assert_close(ours, eager["norm_out"].float(), **tolerance)
        torch.testing.assert_close(ours, diffusers_norm(total, eager["weight"]).float(), **tolerance)
        assert not padded[:, :, :2].any(), "the kernel wrote into the frames the buffer carries over"


@pytest.mark.parametrize("channels", [96, 640])
@pytest.mark.parametrize("case", CASES)
def test_fused_pass_gives_the_eager_results(device, case, channels):
    check_case(case, channels, device, seed=CASES.index(case))


@pytest.mark.parametrize("channels", [160, 192, 320, 384])
@pytest.mark.parametrize("case", CASES[:2])
def test_fused_norm_at_every_encoder_width(device, case, channels):
    check_case(case, channels, device, seed=channels)


@pytest.mark.parametrize("channels", [96, 384])
def test_padded_channel_tiling_agrees_with_channel_blocks(device, channels):
    """A norm that writes no sum runs in equal channel blocks (96 = 3 x 32, 384 = 3 x 128: the rule); the same
    pass with the channels padded to a power of two and the rest masked gives the norm within a step."""
    from latentforge.tokenizers.wan.fused_norm import Tiling, _launch, tiling

    rule = tiling(channels, writes_sum=False, writes_norm=True)
    assert rule.parts == 3 and rule.parts * rule.block_c == channels
    padded_c = 1 << (channels - 1).bit_length()
    results = []
    for layout in (rule, Tiling(parts=1, block_c=padded_c, rows=8192 // padded_c, warps=4)):
        arguments, padded = operands(CASES[1], channels, device, seed=7)
        _launch(**arguments, layout=layout)
        results.append(padded[:, :, 2:].cpu().float())
    torch.testing.assert_close(results[0], results[1], rtol=ONE_BF16_STEP, atol=1e-30)
