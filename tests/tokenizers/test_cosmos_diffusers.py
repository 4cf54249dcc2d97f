"""The cosmos-cv tokenizers against diffusers' AutoencoderKLCosmos (code we did not write): a tiny random model
of the released CV trunk saved with save_pretrained and loaded through our diffusers route.

fp32 differs by < 1e-6 relative (measured 5.6e-7 encode, 7.0e-7 decode), and only because diffusers computes two
layers differently from the reference Cosmos-Tokenizer (whose operations ours follow): SiLU as F.silu (the
reference: x * sigmoid(x)) and attention through scaled_dot_product_attention (the reference: bmm, scale, softmax,
bmm). With those two swapped in, ours equals diffusers bit for bit, which the last test shows."""

from __future__ import annotations

import functools
import subprocess

import pytest
import torch
import torch.nn.functional as F

from helpers.cosmos_models import save_diffusers_cosmos
from latentforge import registry
from latentforge.config import TokenizerConfig
from latentforge.tokenizers.checkpoints import CheckpointError
from latentforge.tokenizers.cosmos import attention, decoder, encoder, layers


@pytest.fixture(scope="module")
def pipeline_folder(tmp_path_factory):
    """(diffusers model, a pipeline folder holding it under vae/)."""
    root = tmp_path_factory.mktemp("cosmos-pipeline")
    return save_diffusers_cosmos(root / "vae"), root


@pytest.fixture(scope="module")
def video() -> torch.Tensor:
    return torch.rand(1, 3, 9, 16, 24, generator=torch.Generator().manual_seed(4)) * 2 - 1


@pytest.fixture(scope="module")
def tokenizer(pipeline_folder):
    config = TokenizerConfig(name="cosmos-cv8x8x8", checkpoint=str(pipeline_folder[1]))
    return registry.resolve("tokenizer", "cosmos-cv8x8x8").from_config(config, "cpu")


@functools.lru_cache
def _sha256sum(path) -> str:
    return subprocess.run(["sha256sum", str(path)], capture_output=True, text=True, check=True).stdout.split()[0]


def _relative(ours: torch.Tensor, reference: torch.Tensor) -> float:
    return float((ours - reference).norm() / reference.norm())


def test_encode_and_decode_match_diffusers_within_their_float_rounding(tokenizer, pipeline_folder, video):
    vae = pipeline_folder[0]
    with torch.no_grad():
        expected = vae.encode(video).latent_dist.mode()
        expected_frames = vae.decode(expected).sample.clamp(-1, 1)
    latent = tokenizer.encode(video)
    assert latent.shape == expected.shape == (1, 16, 2, 2, 3)
    assert _relative(latent, expected) <= 1e-6  # measured 5.6e-7, max-abs 9.5e-7
    assert (latent - expected).abs().max() <= 2e-6
    frames = tokenizer.decode(expected)
    assert frames.shape == (1, 3, 9, 16, 24)
    assert _relative(frames, expected_frames) <= 2e-6  # measured 7.0e-7, max-abs 7.4e-6
    assert expected.std() > 0.1


def test_the_folder_is_pinned_by_its_weights_sha256(tokenizer, pipeline_folder):
    weights = pipeline_folder[1] / "vae" / "diffusion_pytorch_model.safetensors"
    assert tokenizer.fingerprint()["checkpoint_sha256"] == _sha256sum(weights)
    assert tokenizer.fingerprint()["checkpoint_format"] == "diffusers-folder"
    cls = registry.resolve("tokenizer", "cosmos-cv8x8x8")
    with pytest.raises(CheckpointError, match="SHA-256"):
        cls(str(pipeline_folder[1]), sha256="0" * 64)


def test_a_folder_of_other_compression_is_refused_by_name(pipeline_folder):
    cls = registry.resolve("tokenizer", "cosmos-cv8x16x16")
    with pytest.raises(CheckpointError, match="spatial_compression_ratio"):
        cls(str(pipeline_folder[1]))


def test_a_discrete_tokenizer_refuses_a_diffusers_folder(pipeline_folder):
    with pytest.raises(CheckpointError, match="diffusers has no DV model"):
        registry.resolve("tokenizer", "cosmos-dv8x8x8")(str(pipeline_folder[1]))


def test_with_diffusers_silu_and_sdpa_swapped_in_ours_equals_diffusers_bit_for_bit(
        tokenizer, pipeline_folder, video, monkeypatch):
    def sdpa_spatial(self, q, k, v):
        b, _, t, h, w = q.shape
        heads = [x.permute(0, 2, 3, 4, 1).flatten(2, 3).flatten(0, 1)[:, None] for x in (q, k, v)]
        out = F.scaled_dot_product_attention(*heads).transpose(1, 2).flatten(2, 3)
        return out.unflatten(1, (h, w)).unflatten(0, (b, t)).permute(0, 4, 1, 2, 3)

    def sdpa_temporal(self, q, k, v):
        b, _, t, h, w = q.shape
        heads = [x.permute(0, 3, 4, 2, 1).flatten(0, 2)[:, None] for x in (q, k, v)]
        mask = torch.tril(q.new_ones(t, t)).bool()
        out = F.scaled_dot_product_attention(*heads, attn_mask=mask).transpose(1, 2).flatten(2, 3)
        return out.unflatten(0, (b, h, w)).permute(0, 4, 3, 1, 2)

    for module in (layers, encoder, decoder):
        monkeypatch.setattr(module, "swish", F.silu)
    monkeypatch.setattr(attention.SpatialAttention, "attend", sdpa_spatial)
    monkeypatch.setattr(attention.TemporalAttention, "attend", sdpa_temporal)
    vae = pipeline_folder[0]
    with torch.no_grad():
        expected = vae.encode(video).latent_dist.mode()
        expected_frames = vae.decode(expected).sample.clamp(-1, 1)
    assert torch.equal(tokenizer.encode(video), expected)
    assert torch.equal(tokenizer.decode(expected), expected_frames)


def test_a_4x_folder_loads_its_two_level_decoder(tmp_path):
    # diffusers' config carries the continuous 4x model's shorter decoder in decode_block_out_channels
    vae = save_diffusers_cosmos(tmp_path / "vae", seed=5, decode_block_out_channels=(4, 8, 8),
                                temporal_compression_ratio=4)
    tokenizer = registry.resolve("tokenizer", "cosmos-cv4x8x8")(str(tmp_path / "vae"))
    assert tokenizer.fingerprint()["architecture"]["decoder_channels_mult"] == [2, 4]
    latent = torch.randn(1, 16, 2, 2, 2, generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        expected = vae.decode(latent).sample.clamp(-1, 1)
    frames = tokenizer.decode(latent)
    assert frames.shape == expected.shape == (1, 3, 5, 16, 16)
    assert _relative(frames, expected) <= 2e-6
