"""Tiny Cosmos tokenizers for tests: diffusers' AutoencoderKLCosmos with random weights saved as a diffusers
folder, our own modules traced into TorchScript archives laid out as the released hub folders, and the reference
fixtures (tests/tokenizers/fixtures) read back."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import nn

from latentforge.tokenizers.cosmos.architecture import CosmosArchitecture
from latentforge.tokenizers.cosmos.model import CosmosVideoAutoencoder

FIXTURES = Path(__file__).resolve().parents[1] / "tokenizers" / "fixtures"
# The released trunk at width 2 (released: 128): every layer kind, seconds on a CPU
TINY_DIFFUSERS = dict(encoder_block_out_channels=(2, 4, 8, 8), decode_block_out_channels=(4, 8, 8, 8))


def randomise(model: nn.Module, seed: int) -> nn.Module:
    """Norm gains 1 + 0.2 N, biases 0.1 N, other weights N / sqrt(fan_in): defaults of 1 and 0 would hide a
    swapped parameter."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator)
            if name.endswith("norm.weight"):
                param.copy_(1 + 0.2 * noise)
            elif name.endswith("bias"):
                param.copy_(0.1 * noise)
            else:
                param.copy_(noise / param[0].numel() ** 0.5)
    return model


def save_diffusers_cosmos(folder: Path, seed: int = 3, **config):
    """diffusers' AutoencoderKLCosmos (the CV8x8x8 trunk at TINY_DIFFUSERS widths unless `config` says otherwise)
    with random weights, saved with save_pretrained."""
    from diffusers import AutoencoderKLCosmos  # here, not at import: diffusers takes seconds to import

    vae = randomise(AutoencoderKLCosmos(**{**TINY_DIFFUSERS, **config}).eval(), seed)
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


class _Archive(nn.Module):
    """Our modules under the names a released archive gives them, with a stub forward: latentforge reads only an
    archive's weights and never runs its graph, so a trace of this stub (about a second) serves where a trace of
    the real forward would take tens of seconds on a shared CPU. A loader that ran the graph would get the input
    back plus a constant, not the reference's numbers the tests compare with."""

    def __init__(self, **parts: nn.Module):
        super().__init__()
        for name, module in parts.items():
            setattr(self, name, module)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + sum(p.sum() for p in self.parameters())


def traced_parts(model: CosmosVideoAutoencoder, names: tuple[str, ...]) -> dict[str, torch.jit.ScriptModule]:
    """TorchScript archives of our model laid out as the released ones: `encoder.jit` (encoder + quant_conv),
    `decoder.jit` (post_quant_conv + decoder) and `autoencoder.jit` (the whole module)."""
    parts = {
        "encoder.jit": _Archive(encoder=model.encoder, quant_conv=model.quant_conv),
        "decoder.jit": _Archive(post_quant_conv=model.post_quant_conv, decoder=model.decoder),
        "autoencoder.jit": _Archive(encoder=model.encoder, decoder=model.decoder, quant_conv=model.quant_conv,
                                    post_quant_conv=model.post_quant_conv),
    }
    with torch.no_grad(), warnings.catch_warnings():  # TorchScript is deprecated; the released files use it
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        return {name: torch.jit.trace(parts[name], torch.zeros(1), check_trace=False) for name in names}


def save_hub_folder(folder: Path, model: CosmosVideoAutoencoder,
                    parts: tuple[str, ...] = ("encoder.jit", "decoder.jit")) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, module in traced_parts(model, parts).items():
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=DeprecationWarning)
            torch.jit.save(module, str(folder / name))
    return folder
