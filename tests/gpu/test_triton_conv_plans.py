"""The Triton causal 3x3x3 conv (tokenizers/kernels/triton_conv.py) and its plans in a book (PlannedConvs).

Each candidate config a plan pass may time is checked against cuDNN's fp32 conv of the same bf16 operands (TF32
off): its only error is the final rounding to bf16, so its rel-L2 must be that of rounding the fp32 result itself
(within 5 %), and the same bits come back on a second call. A book naming a Triton plan replays exactly that
kernel; a name recorded under another Triton version is refused, naming both. The whole fast encoder with every
covered convolution on a Triton plan stays as close to diffusers' fp32 encode as with cuDNN's plans.
"""

from __future__ import annotations

import re

import pytest
import torch

from helpers.causal_conv import check_replay_and_tuning, fp32_conv, operands, rel_l2
from latentforge.tokenizers.kernels import triton_conv
from latentforge.tokenizers.kernels.triton_conv import candidates, conv3d_causal, plan_name, weight_taps

# (input, output channels): the Wan2.1 encoder's (96, 192, 384, the head's 32), Wan2.2's (160, 320, 640, its
# head's 96), with each kind of N tiling: one power of two, two sharing the A tile, two programs of half.
SHAPES = [(96, 96), (96, 192), (192, 192), (192, 384), (384, 384), (384, 32), (160, 160), (160, 320), (640, 96)]


@pytest.mark.parametrize("channels,out_channels", SHAPES)
def test_every_candidate_is_fp32_rounded_once_and_repeats_its_bits(channels, out_channels):
    x, w = operands(channels, out_channels, batch=2 if channels == 96 else 1)
    reference = fp32_conv(x, w)
    rounding = rel_l2(reference.to(torch.bfloat16), reference)
    configs = candidates(channels, out_channels)
    assert configs, f"no Triton config covers {channels} -> {out_channels}"
    taps = weight_taps(w)
    for config in configs:
        out = conv3d_causal(x, taps, config)
        assert out.shape == reference.shape and out.is_contiguous(memory_format=torch.channels_last_3d)
        error = rel_l2(out, reference)
        assert error <= 1.05 * rounding, f"{config.label}: rel-L2 {error:.3e} vs rounding fp32 {rounding:.3e}"
        assert torch.equal(out, conv3d_causal(x, taps, config)), f"{config.label}: other bits on a second call"


def test_the_encoders_strided_input_and_a_config_of_the_book():
    """The encoder passes the whole frame-padded buffer; a view of its frames (the cache's last two) is strided."""
    x, w = operands(96, 96, frames=6)
    window = x[:, :, 1:]  # frames 1.. of the buffer: batch stride larger than its frames need
    config = candidates(96, 96)[0]
    assert torch.equal(conv3d_causal(window, weight_taps(w), config),
                       conv3d_causal(window.contiguous(memory_format=torch.channels_last_3d), weight_taps(w), config))


def test_a_book_naming_a_triton_plan_replays_it_and_tuning_times_every_candidate(cudnn_frontend, monkeypatch):
    x, w = operands(192, 192)
    check_replay_and_tuning(monkeypatch, x, w, candidates(192, 192), plan_name,
                            lambda config: conv3d_causal(x, weight_taps(w), config), triton_conv, "conv3d_causal", 2)


def test_a_plan_recorded_under_another_triton_is_refused(cudnn_frontend):
    from latentforge.tokenizers.kernels.conv_kernel import signature
    from latentforge.tokenizers.kernels.plan_book import PlanBook
    from latentforge.tokenizers.kernels.planned_convs import PlannedConvs

    x, w = operands(96, 96)
    name = f"triton0.0.1:{candidates(96, 96)[0].label}"
    planned = PlannedConvs(PlanBook(entries={signature(x, w, None, 1, (0, 1, 1)): name}))
    with pytest.raises(RuntimeError, match=r"Triton 0\.0\.1.*Triton " + re.escape(triton_conv.triton.__version__)):
        planned(x, w, None, 1, (0, 1, 1))


class TritonWherever:
    """A plan book that answers a Triton plan for every convolution the kernel covers, else times as usual."""

    COVERED = re.compile(r"^x\[\d+, (\d+), \d+, \d+, \d+\]:\[[\d, ]+\] w\[(\d+), \d+, 3, 3, 3\]:\[[\d, ]+\] "
                         r"s\[1, 1, 1\] p\[0, 1, 1\] bias=False bfloat16$")

    def __init__(self):
        from latentforge.tokenizers.kernels.plan_book import PlanBook

        self.book = PlanBook()
        self.triton = 0

    def choose(self, key: str, tune) -> str:
        match = self.COVERED.match(key)
        if match is None:
            return self.book.choose(key, tune)
        self.triton += 1
        return plan_name(candidates(int(match[1]), int(match[2]))[0])


def test_the_encoder_on_triton_plans_is_as_close_to_fp32_as_on_cudnn_plans(cudnn_frontend, tmp_path):
    from helpers.random_wan import random_wan_vae
    from latentforge.devices import tf32_off
    from latentforge.tokenizers.kernels.plan_book import PlanBook
    from latentforge.tokenizers.kernels.planned_convs import PlannedConvs
    from latentforge.tokenizers.wan.fast_encoder import FastWanEncoder

    vae = random_wan_vae(dict(base_dim=96, decoder_base_dim=16)).cuda().eval()
    generator = torch.Generator(device="cpu").manual_seed(5)
    video = (torch.rand(1, 3, 9, 96, 160, generator=generator) * 2 - 1).cuda()
    with torch.inference_mode(), tf32_off():
        reference = vae.encode(video).latent_dist.mode()
    cudnn_plans = FastWanEncoder(vae.encoder, vae.quant_conv, window=4, convs=PlannedConvs(PlanBook()))
    triton_book = TritonWherever()
    triton_plans = FastWanEncoder(vae.encoder, vae.quant_conv, window=4, convs=PlannedConvs(triton_book))
    on_cudnn, on_triton = cudnn_plans(video), triton_plans(video)
    assert triton_book.triton >= 10, "the encoder ran too few convolutions on Triton plans"
    assert torch.equal(on_triton, triton_plans(video))
    error_cudnn, error_triton = rel_l2(on_cudnn, reference.float()), rel_l2(on_triton, reference.float())
    assert error_triton <= 1.1 * error_cudnn + 1e-4, f"Triton plans {error_triton:.3e} vs cuDNN's {error_cudnn:.3e}"
