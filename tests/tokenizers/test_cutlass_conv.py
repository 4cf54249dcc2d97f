"""cutlass_conv.py on the CPU: plan names carry the CUTLASS version and are refused under another, which calls
the kernels cover, and a failing config names itself (the kernels themselves run in tests/gpu)."""

from __future__ import annotations

import re

import pytest
import torch

from latentforge.tokenizers.kernels.cutlass import build as cutlass_build
from latentforge.tokenizers.kernels.cutlass import conv as cutlass_conv


def test_plan_names_round_trip_and_another_version_is_refused():
    name = cutlass_conv.plan_name("m128_n192_k64_c2", "4.7.0")
    assert name == "cutlass4.7.0:m128_n192_k64_c2" and cutlass_conv.is_plan_name(name)
    assert cutlass_conv.config_of(name, "4.7.0") == "m128_n192_k64_c2"
    with pytest.raises(RuntimeError, match=r"timed with CUTLASS 4\.7\.0.*builds with CUTLASS 4\.8\.0"):
        cutlass_conv.config_of(name, "4.8.0")
    assert not cutlass_conv.is_plan_name("triton3.6.0:m128_k32_n64+32_g4_w8_s4")


def test_candidates_exist_for_96_and_192_output_channels_only():
    assert all("_n96_" in label for label in cutlass_conv.candidates(96, 96))
    assert all("_n192_" in label for label in cutlass_conv.candidates(96, 192))
    assert cutlass_conv.candidates(384, 384) == () and cutlass_conv.candidates(4, 96) == ()


def test_the_product_library_builds_exactly_the_candidates():
    """The source's configs outside LF_EVERY_CONFIG are the ones a plan pass times: a candidate the library lacks
    would fail every build on an H200, and a config only the bench measures costs every user build time."""
    product = cutlass_build.SOURCE.read_text(encoding="utf-8").split("#ifdef LF_EVERY_CONFIG")[0]
    built = {f"m{m}_n{n}_k{k}_c{c}" for m, n, k, c in re.findall(r"LF_CONFIG\((\d+), (\d+), (\d+), (\d+)\)", product)}
    assert built == {label for labels in cutlass_conv.CANDIDATES.values() for label in labels}


def test_a_cpu_call_is_not_covered():
    x = torch.zeros(1, 96, 4, 8, 8, dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last_3d)
    w = torch.zeros(96, 96, 3, 3, 3, dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last_3d)
    assert not cutlass_conv.covers(x, w, None, 1, (0, 1, 1))


def test_a_failing_config_names_itself_and_the_reason():
    with pytest.raises(RuntimeError, match="m128_n96_k32_c1: the config cannot run this problem"):
        cutlass_conv.check(1, "m128_n96_k32_c1")
    cutlass_conv.check(0, "m128_n96_k32_c1")
