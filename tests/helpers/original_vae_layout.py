"""A tiny diffusers LTX-Video (0.9.1 layout) or LTX-2 VAE's state dict under the official checkpoints' keys: the
inverse of diffusers' `convert_ltx_vae_checkpoint_to_diffusers` and `convert_ltx2_vae_to_diffusers`
(diffusers/loaders/single_file_utils.py), read off their rename tables. The tests check the inverse by loading
its output with diffusers' own `from_single_file`."""

from __future__ import annotations

import re

import torch

# diffusers' encoder block (index, part) -> the official down_blocks index, from the rename tables
_LTX_VIDEO_091_DOWN = {("0", ""): 0, ("0", "downsamplers.0"): 1, ("0", "conv_out"): 2, ("1", ""): 3,
                       ("1", "downsamplers.0"): 4, ("1", "conv_out"): 5, ("2", ""): 6, ("2", "downsamplers.0"): 7,
                       ("3", ""): 8, ("mid", ""): 9}


def _down_index(name: str, block: str, part: str, blocks: int) -> int:
    if name == "ltx-video":
        return _LTX_VIDEO_091_DOWN[(block, part)]
    return 2 * blocks if block == "mid" else 2 * int(block) + (1 if part else 0)  # LTX-2: block, its downsampler


def original_key(name: str, key: str, down_blocks: int) -> str:
    """The official key of diffusers' `key` (without the file's `vae.` prefix)."""
    encoder = re.match(r"encoder\.(?:down_blocks\.(\d+)|(mid)_block)\.(?:(downsamplers\.0|conv_out)\.)?(.*)", key)
    decoder = re.match(r"decoder\.(?:up_blocks\.(\d+)|(mid)_block)\.(upsamplers\.0\.)?(.*)", key)
    if encoder:
        block, mid, part, rest = encoder.groups()
        key = f"encoder.down_blocks.{_down_index(name, block or mid, part or '', down_blocks)}.{rest}"
    elif decoder:
        block, mid, upsampler, rest = decoder.groups()
        index = 0 if mid else 2 * int(block) + (1 if upsampler else 2)
        key = f"decoder.up_blocks.{index}.{rest}"
    key = key.replace(".resnets.", ".res_blocks.")
    key = {"latents_mean": "per_channel_statistics.mean-of-means",
           "latents_std": "per_channel_statistics.std-of-means"}.get(key, key)
    if name == "ltx-video":
        key = re.sub(r"^decoder\.(time_embedder|scale_shift_table)", r"decoder.last_\1", key)
    return key


def original_state_dict(name: str, model, prefix: str = "vae.") -> dict[str, torch.Tensor]:
    """`model`'s tensors as the official file holds them, with the statistics the conversion drops."""
    down_blocks = len(model.config.block_out_channels)
    state = {prefix + original_key(name, k, down_blocks): v.clone() for k, v in model.state_dict().items()}
    channels = model.latents_mean.shape[0]
    state[prefix + "per_channel_statistics.channel"] = torch.arange(channels, dtype=torch.float32)
    state[prefix + "per_channel_statistics.mean-of-stds"] = torch.rand(channels)
    return state
