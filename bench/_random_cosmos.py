"""The Cosmos tokenizer architectures with seeded random weights, written where latentforge's checkpoint code
reads them: CV as a diffusers `AutoencoderKLCosmos` folder, DV as a released-style hub folder (`encoder.jit` +
`decoder.jit`). No real weights are involved; the cost of an encode does not depend on weight values."""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
from torch import nn

from latentforge.tokenizers.cosmos.architecture import released
from latentforge.tokenizers.cosmos.model import CosmosVideoAutoencoder

# The released trunk at width 2 (released: 128) for --tiny: every layer kind, fast on a CPU
TINY_CV_DIFFUSERS = dict(encoder_block_out_channels=(2, 4, 8, 8), decode_block_out_channels=(4, 8, 8, 8))
TINY_DV_CHANNELS = 2


def randomise(model: nn.Module, seed: int) -> nn.Module:
    """Norm gains 1 + 0.2 N, biases 0.1 N, other weights N / sqrt(fan_in): defaults of 1 and 0 would hide a
    swapped parameter, and fan-in scaling keeps activations of order one through the full-size trunk."""
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


def save_random_cv_diffusers(folder: Path, tiny: bool, seed: int = 3):
    """diffusers' AutoencoderKLCosmos (its defaults are Cosmos-1.0-Tokenizer-CV8x8x8), random weights, saved with
    save_pretrained; returned in fp32 on the CPU, eval mode."""
    from diffusers import AutoencoderKLCosmos

    vae = randomise(AutoencoderKLCosmos(**(TINY_CV_DIFFUSERS if tiny else {})).eval(), seed)
    vae.save_pretrained(folder)
    return vae


class _WeightsOnlyArchive(nn.Module):
    """Our modules under the names a released archive gives them. latentforge reads only an archive's tensors and
    never runs its graph, so the traced forward is a stub (a trace of the real one at full size would take
    minutes); a loader that ran it would get its input back plus a constant."""

    def __init__(self, **parts: nn.Module):
        super().__init__()
        for name, module in parts.items():
            setattr(self, name, module)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + sum(p.sum() for p in self.parameters())


def random_dv_model(tiny: bool, seed: int = 5) -> CosmosVideoAutoencoder:
    """Our DV8x16x16 autoencoder (released widths, or width 2 for --tiny), random weights; quant_conv x4 so the
    pre-quantisation values spread over the FSQ levels and the ids vary."""
    arch = released("DV", 8, 16)
    if tiny:
        arch = arch.narrowed(TINY_DV_CHANNELS, arch.channels_mult, arch.num_res_blocks, arch.z_channels)
    model = randomise(CosmosVideoAutoencoder(arch).eval(), seed)
    with torch.no_grad():
        model.quant_conv.conv3d.weight.mul_(4)
    return model


def save_random_dv_hub_folder(folder: Path, model: CosmosVideoAutoencoder) -> None:
    """`encoder.jit` (encoder + quant_conv) and `decoder.jit` (post_quant_conv + decoder), as the hub folders."""
    parts = {"encoder.jit": _WeightsOnlyArchive(encoder=model.encoder, quant_conv=model.quant_conv),
             "decoder.jit": _WeightsOnlyArchive(post_quant_conv=model.post_quant_conv, decoder=model.decoder)}
    folder.mkdir(parents=True, exist_ok=True)
    with torch.no_grad(), warnings.catch_warnings():  # TorchScript is deprecated; the released files use it
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        for name, module in parts.items():
            torch.jit.save(torch.jit.trace(module, torch.zeros(1), check_trace=False), str(folder / name))
