"""Our Cosmos modules against numbers NVIDIA/Cosmos-Tokenizer's own modules computed on seeded tiny models
(tests/tokenizers/fixtures/README.md says how): the reference's state dict loads unchanged, and latents, token
ids and decoded pixels are the reference's."""

from __future__ import annotations

import pytest
import torch

from helpers.cosmos_models import reference_fixture
from latentforge.tokenizers.cosmos.model import CosmosVideoAutoencoder


def _relative(ours: torch.Tensor, reference: torch.Tensor) -> float:
    return float((ours - reference).norm() / reference.norm())


def _model(name: str):
    arch, weights, recorded = reference_fixture(name)
    model = CosmosVideoAutoencoder(arch).eval()
    model.load_state_dict(weights, strict=True)  # the reference's names, every key, no other
    video = (recorded["pixels"].double() / 127.5 - 1.0).float()
    return model, video, recorded


def test_cv_latent_and_decode_equal_the_reference():
    model, video, recorded = _model("cosmos_cv8x8x8_tiny")
    with torch.no_grad():
        latent = model.encode(video)
        decoded = model.decode(recorded["latent"])
    assert latent.shape == recorded["latent"].shape == (1, 16, 2, 2, 3)
    assert _relative(latent, recorded["latent"]) <= 1e-6  # measured: 0 (bit-exact) on x86-64 CPU, torch 2.13
    assert decoded.shape == recorded["decoded"].shape == (1, 3, 9, 16, 24)
    assert _relative(decoded, recorded["decoded"]) <= 1e-6
    assert recorded["latent"].std() > 0.1  # a live network, not constants


def test_dv_token_ids_codes_and_decode_equal_the_reference():
    model, video, recorded = _model("cosmos_dv8x16x16_tiny")
    with torch.no_grad():
        codes, ids = model.quantizer(model.encode(video))
        decoded = model.decode(model.quantizer.ids_to_codes(recorded["ids"][:, :, :2, :2]))
    assert ids.shape == recorded["ids"].shape == (1, 2, 2, 4)
    assert torch.equal(ids, recorded["ids"])  # every position
    assert len(ids.unique()) >= 8  # the ids spread over the vocabulary, not one saturated code
    assert torch.equal(codes, recorded["codes"])
    assert _relative(decoded, recorded["decoded_ids_2x2"]) <= 1e-6


def test_fsq_ids_and_codes_are_one_bijection_over_the_whole_vocabulary():
    model, _, _ = _model("cosmos_dv8x16x16_tiny")
    quantizer = model.quantizer
    ids = torch.arange(64000).reshape(1, 4, 100, 160)
    codes = quantizer.ids_to_codes(ids)
    assert codes.shape == (1, 6, 4, 100, 160)
    assert torch.equal(quantizer.codes_to_ids(codes.movedim(1, -1)).long(), ids)
    assert torch.equal(codes.half().float(), codes)  # exact in float16: a float16 cache holds the tokens
    assert quantizer.vocabulary == 64000


@pytest.mark.parametrize("name", ["cosmos_cv8x8x8_tiny", "cosmos_dv8x16x16_tiny"])
def test_an_unknown_or_missing_key_is_refused(name):
    arch, weights, _ = reference_fixture(name)
    model = CosmosVideoAutoencoder(arch)
    weights.pop("encoder.conv_in.0.conv3d.weight")
    with pytest.raises(RuntimeError, match="encoder.conv_in.0.conv3d.weight"):
        model.load_state_dict(weights, strict=True)
