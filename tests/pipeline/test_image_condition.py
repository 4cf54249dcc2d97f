"""The conditioning latent y of `conditioning.image_latent=wan-i2v` against diffusers' own
WanImageToVideoPipeline.prepare_latents on the same tiny AutoencoderKLWan (random weights, saved as a diffusers
folder and loaded through our Wan2.1 loading code), and the first-frame fact the Wan2.2 TI2V condition rests on."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from helpers.random_wan import save_random_wan_vae
from latentforge.config import BuildConfig
from latentforge.pipeline.conditioning import ConditioningStage, frame0_uint8
from latentforge.tokenizers.base import PIXEL_TABLE
from latentforge.tokenizers.wan import wan22_checkpoint
from latentforge.tokenizers.wan.wan21 import Wan21Tokenizer
from latentforge.tokenizers.wan.wan22 import Wan22Tokenizer

WAN21 = dict(base_dim=8, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
             temperal_downsample=[False, True, True], dropout=0.0)  # fmt: skip
FRAMES, HEIGHT, WIDTH = 5, 16, 32


@pytest.fixture(scope="module")
def wan21(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wan21")
    vae, _ = save_random_wan_vae(folder / "vae", WAN21, seed=5)
    return vae, Wan21Tokenizer(str(folder))


def _video(batch: int, seed: int = 0) -> torch.Tensor:
    """[B, 3, F, H, W] from uint8 through the pixel table, as a build hands frames to the tokenizer."""
    values = torch.randint(0, 256, (batch, 3, FRAMES, HEIGHT, WIDTH), generator=torch.Generator().manual_seed(seed))
    return PIXEL_TABLE[values]


def _config(image_latent: str, precision: str = "fp32") -> BuildConfig:
    config = BuildConfig()
    config.frames.num_frames, config.frames.height, config.frames.width = FRAMES, HEIGHT, WIDTH
    config.tokenizer.name, config.tokenizer.precision = "wan2.1", precision
    config.conditioning.image_latent, config.conditioning.precision = image_latent, precision
    return config


def _diffusers_y(vae, video: torch.Tensor) -> torch.Tensor:
    """diffusers' prepare_latents (not a copy of it: the pipeline's own method) on the tiny VAE."""
    from diffusers import WanImageToVideoPipeline

    pipeline = SimpleNamespace(vae=vae, vae_scale_factor_temporal=4, vae_scale_factor_spatial=8,
                               config=SimpleNamespace(expand_timesteps=False))
    with torch.no_grad():
        _, y = WanImageToVideoPipeline.prepare_latents(
            pipeline, video[:, :, 0], video.shape[0], 16, HEIGHT, WIDTH, FRAMES, torch.float32, torch.device("cpu"))
    return y


def test_wan_i2v_y_equals_diffusers_prepare_latents_bit_for_bit(wan21):
    vae, tokenizer = wan21
    stage = ConditioningStage(_config("wan-i2v"), tokenizer, None)
    video = _video(1)
    ours = stage.encode(video)[1]["image_cond_latent"]
    expected = _diffusers_y(vae, video)
    assert ours.shape == expected.shape == (1, 20, 2, HEIGHT // 8, WIDTH // 8)
    assert torch.equal(ours[:, :4], expected[:, :4])  # the mask: ones over latent frame 0 only
    assert ours[:, :4, 0].eq(1).all() and ours[:, :4, 1:].eq(0).all()
    assert torch.equal(ours, expected)
    assert stage.streams[0].shape == (20, 2, HEIGHT // 8, WIDTH // 8)


def test_wan_i2v_y_of_a_batch_is_each_sample_s_own(wan21):
    """A batch of two gives each sample the y of its own frame 0 (diffusers' batch of one each)."""
    vae, tokenizer = wan21
    video = _video(2, seed=1)
    ours = ConditioningStage(_config("wan-i2v"), tokenizer, None).encode(video)[1]["image_cond_latent"]
    for i in range(2):
        torch.testing.assert_close(ours[i:i + 1], _diffusers_y(vae, video[i:i + 1]), rtol=0, atol=1e-5)
    assert not torch.equal(ours[0, 4:], ours[1, 4:])


def test_frame0_goes_back_to_the_uint8_it_came_from():
    values = torch.randint(0, 256, (2, 3, 1, 5, 7), generator=torch.Generator().manual_seed(3))
    frames = frame0_uint8(PIXEL_TABLE[values])
    assert frames.dtype == torch.uint8 and frames.shape == (2, 5, 7, 3)
    assert torch.equal(frames, values[:, :, 0].permute(0, 2, 3, 1).to(torch.uint8))


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("tokenizer_class", ["wan2.1", "wan2.2"])
def test_frame0_encoded_alone_is_latent_frame_0(tmp_path, tokenizer_class, precision):
    """Why first-frame stores nothing: a causal Wan VAE's latent frame 0 is the encode of frame 0 alone. In fp32
    (diffusers' modules) bit for bit. On the bf16 fast path frame 0 runs inside the clip's first window or alone,
    convolutions of other frame counts whose bf16 kernels round per CPU (bit-equal with AVX-512 bf16 / AMX, 5.8e-4
    apart with AVX2 kernels), so within a bf16 tolerance there."""
    if tokenizer_class == "wan2.2":
        save_random_wan_vae(tmp_path / "vae", wan22_checkpoint.diffusers_config(8, 8), seed=3)
        tokenizer = Wan22Tokenizer(str(tmp_path), precision=precision)
    else:
        save_random_wan_vae(tmp_path / "vae", WAN21, seed=4)
        tokenizer = Wan21Tokenizer(str(tmp_path), precision=precision)
    video = _video(2, seed=2)
    in_clip, alone = tokenizer.encode(video)[:, :, :1], tokenizer.encode(video[:, :, :1].contiguous())
    if precision == "fp32":
        assert torch.equal(in_clip, alone)
    else:
        assert float((in_clip - alone).norm() / alone.norm()) < 5e-3
