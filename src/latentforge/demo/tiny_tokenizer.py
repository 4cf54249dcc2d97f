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


def _seeded(model: nn.Module, seed: int) -> nn.Module:
    """Norm gains near 1, small biases, other weights N(0, 1/fan_in): a live network whose codes spread."""
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
    model = _seeded(CosmosVideoAutoencoder(released("DV", 8, 16).narrowed(2, (2, 4, 4), 1, 16)).eval(), seed)
    folder = Path(parent) / FOLDER_NAME
    folder.mkdir(parents=True, exist_ok=True)
    parts = {"encoder.jit": _ReleasedParts(encoder=model.encoder, quant_conv=model.quant_conv),
             "decoder.jit": _ReleasedParts(post_quant_conv=model.post_quant_conv, decoder=model.decoder)}
    with torch.no_grad(), warnings.catch_warnings():  # TorchScript is deprecated; the released files use it
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        for name, part in parts.items():
            torch.jit.save(torch.jit.trace(part, torch.zeros(1), check_trace=False), str(folder / name))
    return folder
