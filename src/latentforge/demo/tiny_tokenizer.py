"""A tiny real-architecture Cosmos DV8x16x16 tokenizer (random weights) for `latentforge demo --tokenizer
cosmos-dv8x16x16`: our Cosmos modules at width 2 with seeded weights, saved as a released-style hub folder
(`encoder.jit` + `decoder.jit`) that the cosmos-dv8x16x16 backend loads through its normal checkpoint code.

latentforge reads only a TorchScript archive's tensors, never its graph, so each archive is a trace of a module
that holds the released part's submodules under their released names and whose forward is a cheap stand-in: a
trace of the real forward takes tens of seconds on a laptop CPU. The tokens it gives are those of an untrained
tokenizer: they show the cache format and its statistics, not a real clip's content.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
from torch import nn

from ..tokenizers.cosmos.architecture import released
from ..tokenizers.cosmos.model import CosmosVideoAutoencoder

FOLDER_NAME = "Cosmos-Tokenizer-DV8x16x16"  # a name the backend's variant check accepts


class _ReleasedParts(nn.Module):
    def __init__(self, **parts: nn.Module):
        super().__init__()
        for name, module in parts.items():
            setattr(self, name, module)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # never run by latentforge (see the module docstring)
        return x


def save_hub_folder(folder: Path, model: CosmosVideoAutoencoder,
                    parts: tuple[str, ...] = ("encoder.jit", "decoder.jit")) -> Path:
    """`model` as a released-style hub folder: `encoder.jit` (encoder + quant_conv), `decoder.jit`
    (post_quant_conv + decoder) and/or `autoencoder.jit` (all four), each holding the released part's submodules
    under their released names (the demo's tokenizer, the tests' and the benches')."""
    modules = {"encoder.jit": ("encoder", "quant_conv"), "decoder.jit": ("post_quant_conv", "decoder"),
               "autoencoder.jit": ("encoder", "decoder", "quant_conv", "post_quant_conv")}
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with torch.no_grad(), warnings.catch_warnings():  # TorchScript is deprecated; the released files use it
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        for name in parts:
            part = _ReleasedParts(**{sub: getattr(model, sub) for sub in modules[name]})
            torch.jit.save(torch.jit.trace(part, torch.zeros(1), check_trace=False), str(folder / name))
    return folder


def seeded_weights(model: nn.Module, seed: int) -> nn.Module:
    """`model` with weights drawn from `seed`: norm gains 1 + 0.2 N, biases 0.1 N, other weights N / sqrt(fan_in).
    Defaults of 1 and 0 would hide a swapped parameter, and fan-in scaling keeps activations of order one through
    a full-size trunk: a live network whose codes spread (the demo's tokenizer, the tests' and the benches')."""
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


def make_tiny_cosmos_dv(parent: Path, seed: int = 0) -> Path:
    """Write the tiny DV8x16x16 hub folder under `parent`; return its path (tokenizer.checkpoint)."""
    model = seeded_weights(CosmosVideoAutoencoder(released("DV", 8, 16).narrowed(2, (2, 4, 4), 1, 16)).eval(), seed)
    return save_hub_folder(Path(parent) / FOLDER_NAME, model)
