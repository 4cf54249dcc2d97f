"""diffusers' `AutoencoderKLCosmos` key names -> the reference's (ours), and its config -> our architecture.

diffusers names the same tensors differently (`down_blocks.i.resnets.j.conv1.conv_s` for the reference's
`down.i.block.j.conv1.0.conv3d`, `up_blocks` counted from the coarsest level where the reference's `up` counts
from the finest), and builds no module for a sampler convolution that is never run, where the reference builds
one (its checkpoints hold those tensors).
"""

from __future__ import annotations

import re
from typing import Any

from .architecture import CosmosArchitecture

_CONV_PAIR = {"conv_s": "0.conv3d", "conv_t": "1.conv3d"}
_ATTENTION = {"to_q": "q.conv3d", "to_k": "k.conv3d", "to_v": "v.conv3d", "to_out.0": "proj_out.conv3d",
              "norm.norm": "norm.norm"}  # fmt: skip


def _layer(rest: str) -> str:
    """A resnet's or sampler's inner name: conv_s/conv_t pairs, the shortcut, single convs."""
    match = re.match(r"(conv[12]|conv_in|conv_out)\.(conv_s|conv_t)\.(.*)", rest)
    if match:
        return f"{match[1]}.{_CONV_PAIR[match[2]]}.{match[3]}"
    match = re.match(r"conv_shortcut\.(.*)", rest)
    if match:
        return f"nin_shortcut.conv3d.{match[1]}"
    match = re.match(r"(conv[123])\.(weight|bias)$", rest)
    if match:
        return f"{match[1]}.conv3d.{match[2]}"
    return rest  # norm1.norm.*, norm2.norm.*


def _attention(rest: str) -> str:
    for old, new in _ATTENTION.items():
        if rest.startswith(old + "."):
            return new + rest[len(old):]
    return rest


def diffusers_to_reference_key(key: str, decoder_levels: int) -> str:
    """One diffusers key -> the reference's; a key of no known shape comes back unchanged (the strict key check
    then names it)."""
    part, _, rest = key.partition(".")
    if part in ("quant_conv", "post_quant_conv"):
        return f"{part}.conv3d.{rest}"
    match = re.match(r"(conv_in|conv_out)\.(conv_s|conv_t)\.(.*)", rest)
    if match:
        return f"{part}.{match[1]}.{_CONV_PAIR[match[2]]}.{match[3]}"
    if rest.startswith("norm_out."):
        return key
    match = re.match(r"mid_block\.(resnets|attentions|temp_attentions)\.(\d)\.(.*)", rest)
    if match:
        kind, index, inner = match[1], int(match[2]), match[3]
        if kind == "resnets":
            return f"{part}.mid.block_{index + 1}.{_layer(inner)}"
        return f"{part}.mid.attn_1.{0 if kind == 'attentions' else 1}.{_attention(inner)}"
    match = re.match(r"(down_blocks|up_blocks)\.(\d+)\.(.*)", rest)
    if not match:
        return key
    level = int(match[2]) if match[1] == "down_blocks" else decoder_levels - 1 - int(match[2])
    stage = f"{part}.{'down' if match[1] == 'down_blocks' else 'up'}.{level}"
    inner = match[3]
    match = re.match(r"resnets\.(\d+)\.(.*)", inner)
    if match:
        return f"{stage}.block.{match[1]}.{_layer(match[2])}"
    match = re.match(r"(attentions|temp_attentions)\.(\d+)\.(.*)", inner)
    if match:
        return f"{stage}.attn.{match[2]}.{0 if match[1] == 'attentions' else 1}.{_attention(match[3])}"
    match = re.match(r"(downsamplers|upsamplers)\.0\.(.*)", inner)
    if match:
        return f"{stage}.{'downsample' if match[1] == 'downsamplers' else 'upsample'}.{_layer(match[2])}"
    return key


def architecture_from_config(config: dict[str, Any]) -> CosmosArchitecture:
    """Our architecture for a diffusers config: widths from its block channels (the decoder's list ends with its
    input width, the coarsest level's again)."""
    encoder = list(config["encoder_block_out_channels"])
    decoder = list(config["decode_block_out_channels"])
    channels = encoder[0]
    return CosmosArchitecture(
        channels=channels,
        channels_mult=tuple(c // channels for c in encoder[1:]),
        decoder_channels_mult=tuple(c // channels for c in decoder[:-1]),
        num_res_blocks=int(config["num_layers"]),
        attn_resolutions=tuple(config["attention_resolutions"]),
        resolution=int(config["resolution"]),
        patch_size=int(config["patch_size"]),
        z_channels=int(config["latent_channels"]),
        latent_channels=int(config["latent_channels"]),
        spatial_compression=int(config["spatial_compression_ratio"]),
        temporal_compression=int(config["temporal_compression_ratio"]),
    )
