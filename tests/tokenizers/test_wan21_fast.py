"""The fast Wan2.1 encoder computes the same function as diffusers' AutoencoderKLWan encode (mu)."""

import pytest
import torch
from diffusers import AutoencoderKLWan

from latentforge.tokenizers.kernels.conv_kernel import signature
from latentforge.tokenizers.wan.fast_encoder import FastWanEncoder


@pytest.fixture(scope="module")
def vae():
    torch.manual_seed(0)
    model = AutoencoderKLWan(base_dim=16, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
                             temperal_downsample=[False, True, True]).eval()
    with torch.no_grad():  # spread gammas and biases: defaults (1 and 0) would hide a swapped parameter
        for name, param in model.named_parameters():
            if name.endswith("gamma"):
                param.uniform_(0.5, 1.5)
            elif name.endswith("bias"):
                param.uniform_(-0.2, 0.2)
    return model


@pytest.fixture(scope="module")
def video():
    torch.manual_seed(1)
    return torch.rand(2, 3, 17, 16, 32) * 2 - 1


def reference_mu(model, video):
    with torch.no_grad():
        return model.encode(video).latent_dist.mode()


@pytest.mark.parametrize("window", [4, 8, 16])
def test_fp32_fast_path_equals_diffusers(vae, video, window):
    expected = reference_mu(vae, video)
    got = FastWanEncoder(vae.encoder, vae.quant_conv, dtype=torch.float32, window=window)(video)
    assert got.shape == expected.shape == (2, 16, 5, 2, 4)
    assert float((got - expected).norm() / expected.norm()) < 1e-5


def test_bf16_fast_path_is_no_worse_than_diffusers_bf16(vae, video):
    clip = video[:1, :, :9]  # bf16 convolutions are slow on a CPU without bf16 instructions: one short clip
    expected = reference_mu(vae, clip)
    fast = FastWanEncoder(vae.encoder, vae.quant_conv, dtype=torch.bfloat16, window=4)(clip)
    reference_bf16 = AutoencoderKLWan.from_config(vae.config).eval()
    reference_bf16.load_state_dict(vae.state_dict())
    diffusers_bf16 = reference_mu(reference_bf16.to(torch.bfloat16), clip.bfloat16()).float()
    fast_error = float((fast - expected).norm() / expected.norm())
    diffusers_error = float((diffusers_bf16 - expected).norm() / expected.norm())
    assert fast_error <= diffusers_error
    assert fast_error < 0.02


def test_latent_frame_zero_depends_only_on_pixel_frame_zero(vae, video):
    fast = FastWanEncoder(vae.encoder, vae.quant_conv, dtype=torch.float32, window=8)
    changed = video.clone()
    changed[:, :, 1:] = -changed[:, :, 1:]
    assert torch.equal(fast(video)[:, :, 0], fast(changed)[:, :, 0])


def test_refuses_frame_counts_the_causal_encoder_would_truncate(vae):
    fast = FastWanEncoder(vae.encoder, vae.quant_conv, dtype=torch.float32, window=4)
    with pytest.raises(ValueError, match="T - 1"):
        fast(torch.zeros(1, 3, 8, 16, 16))


def test_a_single_frame_encodes_as_diffusers_encodes_one_image(vae, video):
    # deep verify's frame-0 check encodes pixel frame 0 alone: one latent frame, as diffusers gives it
    image = video[:, :, :1]
    expected = reference_mu(vae, image)
    got = FastWanEncoder(vae.encoder, vae.quant_conv, dtype=torch.float32, window=8)(image)
    assert got.shape == expected.shape == (2, 16, 1, 2, 4)
    assert float((got - expected).norm() / expected.norm()) < 1e-5


def test_every_convolution_runs_through_the_chosen_runner(vae, video, monkeypatch):
    """The runner (recorded cuDNN plans on a GPU) decides every convolution: none bypasses it."""
    expected = FastWanEncoder(vae.encoder, vae.quant_conv, dtype=torch.float32, window=8)(video)
    conv2d, conv3d = torch.nn.functional.conv2d, torch.nn.functional.conv3d
    seen = []

    def runner(x, weight, bias, stride, padding):
        seen.append(signature(x, weight, bias, stride, padding))
        return (conv3d if x.dim() == 5 else conv2d)(x, weight, bias, stride, padding)

    def bypass(*args, **kwargs):
        raise AssertionError("a convolution bypassed the runner")

    monkeypatch.setattr(torch.nn.functional, "conv2d", bypass)
    monkeypatch.setattr(torch.nn.functional, "conv3d", bypass)
    got = FastWanEncoder(vae.encoder, vae.quant_conv, dtype=torch.float32, window=8, convs=runner)(video)
    assert torch.equal(got, expected)
    assert any(s.startswith("x[2, 16, ") for s in seen)  # the stacked first conv, a 2-D conv of frames
    assert len(set(seen)) > 10
