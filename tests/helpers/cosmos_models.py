"""Tiny Cosmos tokenizers for tests: diffusers' AutoencoderKLCosmos with random weights saved as a diffusers
folder, our own modules traced into TorchScript archives laid out as the released hub folders, and the reference
fixtures (tests/tokenizers/fixtures) read back."""

from __future__ import annotations

import json
from pathlib import Path

from safetensors.torch import load_file

from latentforge.demo.tiny_tokenizer import seeded_weights
from latentforge.tokenizers.cosmos.architecture import CosmosArchitecture

FIXTURES = Path(__file__).resolve().parents[1] / "tokenizers" / "fixtures"
# The released trunk at width 2 (released: 128): every layer kind, seconds on a CPU
TINY_DIFFUSERS = dict(encoder_block_out_channels=(2, 4, 8, 8), decode_block_out_channels=(4, 8, 8, 8))


def save_diffusers_cosmos(folder: Path, seed: int = 3, **config):
    """diffusers' AutoencoderKLCosmos (the CV8x8x8 trunk at TINY_DIFFUSERS widths unless `config` says otherwise)
    with random weights, saved with save_pretrained."""
    from diffusers import AutoencoderKLCosmos  # here, not at import: diffusers takes seconds to import

    vae = seeded_weights(AutoencoderKLCosmos(**{**TINY_DIFFUSERS, **config}).eval(), seed)
    vae.save_pretrained(folder)
    return vae


def reference_fixture(name: str) -> tuple[CosmosArchitecture, dict, dict]:
    """(architecture, weights in the reference's names as float32, recorded tensors) of one fixture case."""
    case = json.loads((FIXTURES / "cosmos_fixtures.json").read_text())["cases"][name]
    config = case["config"]
    discrete = "levels" in config
    arch = CosmosArchitecture(
        channels=config["channels"], channels_mult=tuple(config["channels_mult"]),
        decoder_channels_mult=tuple(config["channels_mult"]), num_res_blocks=config["num_res_blocks"],
        attn_resolutions=tuple(config["attn_resolutions"]), resolution=config["resolution"],
        patch_size=config["patch_size"], z_channels=config["z_channels"],
        latent_channels=config["embedding_dim"] if discrete else config["latent_channels"],
        spatial_compression=config["spatial_compression"], temporal_compression=config["temporal_compression"],
        levels=tuple(config["levels"]) if discrete else None,
    )
    weights = {k: v.float() for k, v in load_file(FIXTURES / f"{name}.weights.safetensors").items()}
    return arch, weights, load_file(FIXTURES / f"{name}.io.safetensors")


