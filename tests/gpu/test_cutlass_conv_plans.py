"""CUTLASS's causal 3x3x3 conv (tokenizers/kernels/cutlass/conv.py) and its plans in a book (PlannedConvs), on
an sm_90 GPU where the library builds (nvcc and CUTLASS's headers; the tests skip, saying so, elsewhere).

As for the Triton kernel: each candidate config against cuDNN's fp32 conv of the same bf16 operands (TF32 off)
must carry only the final rounding to bf16 (rel-L2 within 5 % of rounding the fp32 result itself) and give the
same bits on a second call; a book naming a CUTLASS plan replays exactly that kernel, tuning times every
candidate, and a name recorded with another CUTLASS version is refused, naming both.
"""

from __future__ import annotations

import pytest
import torch

from helpers.causal_conv import check_replay_and_tuning, fp32_conv, operands, rel_l2
from latentforge.tokenizers.kernels.cutlass import conv as cutlass_conv


@pytest.fixture(scope="module")
def kernels() -> cutlass_conv.CutlassKernels:
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the CUTLASS kernels are built for sm_90a (an H100 or H200)")
    built = cutlass_conv.kernels()
    if built is None:
        pytest.skip("CUTLASS's library cannot be built here (no nvcc, or no CUTLASS headers)")
    return built


@pytest.mark.parametrize("channels,out_channels", [(96, 96), (96, 192), (192, 192)])
def test_every_candidate_is_fp32_rounded_once_and_repeats_its_bits(kernels, channels, out_channels):
    x, w = operands(channels, out_channels)
    reference = fp32_conv(x, w)
    rounding = rel_l2(reference.to(torch.bfloat16), reference)
    assert cutlass_conv.covers(x, w, None, 1, (0, 1, 1))
    for label in cutlass_conv.candidates(channels, out_channels):
        out = kernels.conv(label, x, w)
        assert out.shape == reference.shape and out.is_contiguous(memory_format=torch.channels_last_3d)
        error = rel_l2(out, reference)
        assert error <= 1.05 * rounding, f"{label}: rel-L2 {error:.3e} vs rounding fp32 {rounding:.3e}"
        assert torch.equal(out, kernels.conv(label, x, w)), f"{label}: other bits on a second call"


def test_a_book_naming_a_cutlass_plan_replays_it_and_tuning_times_every_candidate(kernels, cudnn_frontend,
                                                                                    monkeypatch):
    x, w = operands(192, 192)
    check_replay_and_tuning(monkeypatch, x, w, cutlass_conv.candidates(192, 192),
                            lambda label: cutlass_conv.plan_name(label, kernels.version),
                            lambda label: kernels.conv(label, x, w), kernels, "conv", 0)


def test_a_plan_recorded_with_another_cutlass_is_refused(kernels, cudnn_frontend):
    from latentforge.tokenizers.kernels.conv_kernel import signature
    from latentforge.tokenizers.kernels.plan_book import PlanBook
    from latentforge.tokenizers.kernels.planned_convs import PlannedConvs

    x, w = operands(96, 96)
    name = cutlass_conv.plan_name(cutlass_conv.candidates(96, 96)[0], "0.0.1")
    planned = PlannedConvs(PlanBook(entries={signature(x, w, None, 1, (0, 1, 1)): name}))
    with pytest.raises(RuntimeError, match=rf"CUTLASS 0\.0\.1.*CUTLASS {kernels.version}"):
        planned(x, w, None, 1, (0, 1, 1))
