"""The Cosmos tokenizer architectures with seeded random weights, written where latentforge's checkpoint code
reads them: CV as a diffusers `AutoencoderKLCosmos` folder, DV as a released-style hub folder (`encoder.jit` +
`decoder.jit`). No real weights are involved; the cost of an encode does not depend on weight values."""

from __future__ import annotations

from pathlib import Path

import torch

from latentforge.demo.tiny_tokenizer import seeded_weights
from latentforge.tokenizers.cosmos.architecture import released
from latentforge.tokenizers.cosmos.model import CosmosVideoAutoencoder

# The released trunk at width 2 (released: 128) for --tiny: every layer kind, fast on a CPU
TINY_CV_DIFFUSERS = dict(encoder_block_out_channels=(2, 4, 8, 8), decode_block_out_channels=(4, 8, 8, 8))
TINY_DV_CHANNELS = 2


def save_random_cv_diffusers(folder: Path, tiny: bool, seed: int = 3):
    """diffusers' AutoencoderKLCosmos (its defaults are Cosmos-1.0-Tokenizer-CV8x8x8), random weights, saved with
    save_pretrained; returned in fp32 on the CPU, eval mode."""
    from diffusers import AutoencoderKLCosmos

    vae = seeded_weights(AutoencoderKLCosmos(**(TINY_CV_DIFFUSERS if tiny else {})).eval(), seed)
    vae.save_pretrained(folder)
    return vae


def random_dv_model(tiny: bool, seed: int = 5) -> CosmosVideoAutoencoder:
    """Our DV8x16x16 autoencoder (released widths, or width 2 for --tiny), random weights; quant_conv x4 so the
    pre-quantisation values spread over the FSQ levels and the ids vary."""
    arch = released("DV", 8, 16)
    if tiny:
        arch = arch.narrowed(TINY_DV_CHANNELS, arch.channels_mult, arch.num_res_blocks, arch.z_channels)
    model = seeded_weights(CosmosVideoAutoencoder(arch).eval(), seed)
    with torch.no_grad():
        model.quant_conv.conv3d.weight.mul_(4)
    return model


