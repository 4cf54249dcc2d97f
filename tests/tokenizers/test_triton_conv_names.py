"""The Triton conv plans' rules that hold without a GPU (tokenizers/kernels/triton_conv.py): which convolutions get
which candidate configs, that every candidate tiles its conv exactly, and that a recorded plan name is refused, naming
both versions, where this process has another Triton or none. The kernel itself is tested on the GPU
(tests/gpu/test_triton_conv_plans.py)."""

import pytest
import torch

from latentforge.tokenizers.kernels import triton_conv
from latentforge.tokenizers.kernels.triton_conv import ConvConfig, candidates, config_of, covers

ENCODER_CONVS = [(96, 96), (96, 192), (192, 192), (192, 384), (384, 384), (384, 32), (160, 160), (160, 320),
                 (320, 320), (640, 96)]


@pytest.mark.parametrize("channels,out_channels", ENCODER_CONVS)
def test_every_encoder_conv_gets_candidates_that_tile_it_exactly(channels, out_channels):
    configs = candidates(channels, out_channels)
    assert configs
    for config in configs:
        config.check(channels, out_channels)  # raises where the tiles do not cover the channels exactly
        assert out_channels % sum(config.n_split) == 0 and channels % sum(config.k_split) == 0
        assert ConvConfig.parse(config.label) == config


def test_convs_the_kernel_cannot_tile_get_no_candidates():
    assert candidates(640, 640) == []  # 512 + 128 wide, or two programs of 320 = 256 + 64: past its tiles
    assert candidates(96, 112) == []  # 112 = 64 + 48 and 56 = 32 + 24: not one or two powers of two
    assert candidates(96, 24) == []  # 24 = 16 + 8: a dot narrower than 16
    with pytest.raises(ValueError, match="does not divide"):
        ConvConfig(128, (32,), (64, 32)).check(96, 160)


def test_a_recorded_name_needs_the_triton_it_was_timed_under(monkeypatch):
    label = candidates(192, 192)[0].label
    monkeypatch.setattr(triton_conv, "triton", None)
    with pytest.raises(RuntimeError, match=r"timed under Triton 3\.6\.0, and this process has no Triton"):
        config_of(f"triton3.6.0:{label}")

    class OtherTriton:
        __version__ = "3.5.1"

    monkeypatch.setattr(triton_conv, "triton", OtherTriton)
    with pytest.raises(RuntimeError, match=r"Triton 3\.6\.0, and this process has Triton 3\.5\.1"):
        config_of(f"triton3.6.0:{label}")
    assert config_of(f"triton3.5.1:{label}") == candidates(192, 192)[0]
    assert triton_conv.is_plan_name(triton_conv.plan_name(candidates(192, 192)[0]))
    assert not triton_conv.is_plan_name("eng62_k2=4_k13=0") and not triton_conv.is_plan_name("pytorch")


def test_the_cpu_never_runs_it():
    x = torch.zeros(1, 96, 4, 8, 8).contiguous(memory_format=torch.channels_last_3d)
    w = torch.zeros(96, 96, 3, 3, 3)
    assert not covers(x, w, None, 1, (0, 1, 1))
