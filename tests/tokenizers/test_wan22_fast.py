"""The fast encoder runs the Wan2.2 VAE encoder as diffusers' AutoencoderKLWan (Wan2.2 configuration) encodes mu."""

import pytest
import torch
from diffusers import AutoencoderKLWan
from diffusers.models.autoencoders.autoencoder_kl_wan import patchify

from latentforge.tokenizers.kernels.conv_kernel import signature
from latentforge.tokenizers.wan.fast_encoder import FastWanEncoder
from latentforge.tokenizers.wan.wan22_checkpoint import diffusers_config

LATENT_SHAPE = (2, 48, 4, 1, 2)  # 13 frames of 16x32: 1 + 12/4 latent frames of 16/16 x 32/16


@pytest.fixture(scope="module")
def vae():
    torch.manual_seed(0)
    model = AutoencoderKLWan.from_config(diffusers_config(base_dim=8, decoder_base_dim=8)).eval()
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
    return torch.rand(2, 3, 13, 16, 32) * 2 - 1


def reference_mu(model, video):
    with torch.no_grad():  # diffusers patchifies 2x2 inside encode
        return model.encode(video).latent_dist.mode()


@pytest.fixture(scope="module")
def expected(vae, video):
    return reference_mu(vae, video)


def fast(vae, video, dtype=torch.float32, window=8, convs=None):
    encoder = FastWanEncoder(vae.encoder, vae.quant_conv, dtype=dtype, window=window, convs=convs)
    return encoder(patchify(video, patch_size=2))


def rel_l2(got, expected) -> float:
    return float((got - expected).norm() / expected.norm())


@pytest.mark.parametrize("window", [4, 8, 12])  # 1+4+4+4 frames, 1+8 then a shorter 4, one window
def test_fp32_fast_path_equals_diffusers(vae, video, expected, window):
    got = fast(vae, video, window=window)
    assert got.shape == expected.shape == LATENT_SHAPE
    assert rel_l2(got, expected) < 1e-5


def test_bf16_fast_path_is_no_worse_than_diffusers_bf16(vae, video):
    clip = video[:1, :, :5]  # diffusers' bf16 convolutions are slow on the CPU: one short clip
    expected = reference_mu(vae, clip)
    got = fast(vae, clip, dtype=torch.bfloat16, window=4)
    reference_bf16 = AutoencoderKLWan.from_config(vae.config).eval()
    reference_bf16.load_state_dict(vae.state_dict())
    diffusers_bf16 = reference_mu(reference_bf16.to(torch.bfloat16), clip.bfloat16()).float()
    assert rel_l2(got, expected) <= rel_l2(diffusers_bf16, expected)
    assert rel_l2(got, expected) < 0.02


def test_latent_frame_zero_depends_only_on_pixel_frame_zero(vae, video):
    changed = video.clone()
    changed[:, :, 1:] = -changed[:, :, 1:]
    assert torch.equal(fast(vae, video)[:, :, 0], fast(vae, changed)[:, :, 0])


def test_a_lone_first_frame_encodes_as_diffusers_encodes_one_image(vae, video):
    image = video[:, :, :1]
    expected = reference_mu(vae, image)
    got = fast(vae, image)
    assert got.shape == expected.shape == (2, 48, 1, 1, 2)
    assert rel_l2(got, expected) < 1e-5


def test_every_convolution_runs_through_the_chosen_runner(vae, video, monkeypatch):
    """The runner (recorded cuDNN plans on a GPU) decides every convolution: none bypasses it."""
    expected = fast(vae, video)
    conv2d, conv3d = torch.nn.functional.conv2d, torch.nn.functional.conv3d
    seen = []

    def runner(x, weight, bias, stride, padding):
        seen.append(signature(x, weight, bias, stride, padding))
        return (conv3d if x.dim() == 5 else conv2d)(x, weight, bias, stride, padding)

    def bypass(*args, **kwargs):
        raise AssertionError("a convolution bypassed the runner")

    monkeypatch.setattr(torch.nn.functional, "conv2d", bypass)
    monkeypatch.setattr(torch.nn.functional, "conv3d", bypass)
    got = fast(vae, video, convs=runner)
    assert torch.equal(got, expected)
    assert any(s.startswith("x[18, 40, 8, 16]") for s in seen)  # first conv: 3 frames x 12 channels, 2-D
    assert len(set(seen)) > 10
