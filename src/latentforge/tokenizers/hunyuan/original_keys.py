"""HunyuanVideo 1.5's official VAE keys (the module `AutoencoderKLConv3D` of Tencent-Hunyuan/HunyuanVideo-1.5,
`hyvideo/models/autoencoders/hunyuanvideo_15_vae.py`) and diffusers' `AutoencoderKLHunyuanVideo15` keys, each
renamed to the other.

The renaming is the one diffusers' `scripts/convert_hunyuan_video1_5_to_diffusers.py`
(`convert_hunyuan_video_15_vae_checkpoint_to_diffusers`) spells out key by key for the released sizes, written
here as patterns so that any width and depth renames: `down.{i}.block.{j}` -> `down_blocks.{i}.resnets.{j}`,
`down.{i}.downsample` -> `down_blocks.{i}.downsamplers.0`, `up.{i}.block.{j}` -> `up_blocks.{i}.resnets.{j}` (the
same index), `up.{i}.upsample` -> `up_blocks.{i}.upsamplers.0`, `mid.block_1` / `mid.block_2` ->
`mid_block.resnets.0` / `.1`, `mid.attn_1.{norm,proj_out}` -> `mid_block.attentions.0.{norm,proj_out}`,
`mid.attn_1.{q,k,v}` -> `mid_block.attentions.0.to_{q,k,v}`; `conv_in`, `conv_out` and `norm_out` keep their names.
A key no pattern matches keeps its name, so the exact key check names it.
"""

from __future__ import annotations

import re

_SIDE = r"^(encoder|decoder)\."
# (official pattern, diffusers replacement), (diffusers pattern, official replacement)
_RULES: tuple[tuple[str, str, str, str], ...] = (
    (_SIDE + r"down\.(\d+)\.block\.(\d+)\.", r"\1.down_blocks.\2.resnets.\3.",
     _SIDE + r"down_blocks\.(\d+)\.resnets\.(\d+)\.", r"\1.down.\2.block.\3."),
    (_SIDE + r"down\.(\d+)\.downsample\.", r"\1.down_blocks.\2.downsamplers.0.",
     _SIDE + r"down_blocks\.(\d+)\.downsamplers\.0\.", r"\1.down.\2.downsample."),
    (_SIDE + r"up\.(\d+)\.block\.(\d+)\.", r"\1.up_blocks.\2.resnets.\3.",
     _SIDE + r"up_blocks\.(\d+)\.resnets\.(\d+)\.", r"\1.up.\2.block.\3."),
    (_SIDE + r"up\.(\d+)\.upsample\.", r"\1.up_blocks.\2.upsamplers.0.",
     _SIDE + r"up_blocks\.(\d+)\.upsamplers\.0\.", r"\1.up.\2.upsample."),
    (_SIDE + r"mid\.block_1\.", r"\1.mid_block.resnets.0.",
     _SIDE + r"mid_block\.resnets\.0\.", r"\1.mid.block_1."),
    (_SIDE + r"mid\.block_2\.", r"\1.mid_block.resnets.1.",
     _SIDE + r"mid_block\.resnets\.1\.", r"\1.mid.block_2."),
    (_SIDE + r"mid\.attn_1\.(norm|proj_out)\.", r"\1.mid_block.attentions.0.\2.",
     _SIDE + r"mid_block\.attentions\.0\.(norm|proj_out)\.", r"\1.mid.attn_1.\2."),
    (_SIDE + r"mid\.attn_1\.(q|k|v)\.", r"\1.mid_block.attentions.0.to_\2.",
     _SIDE + r"mid_block\.attentions\.0\.to_(q|k|v)\.", r"\1.mid.attn_1.\2."),
)
_TO_DIFFUSERS = tuple((re.compile(pattern), replacement) for pattern, replacement, _, _ in _RULES)
_TO_ORIGINAL = tuple((re.compile(pattern), replacement) for _, _, pattern, replacement in _RULES)
# a key only the official layout has: its blocks are `down.{i}` / `up.{i}` / `mid.`
_ORIGINAL_LAYOUT = re.compile(_SIDE + r"(down\.\d+\.|up\.\d+\.|mid\.)")


def is_original_layout(keys) -> bool:
    """Whether these keys name the official module's blocks (rather than diffusers' `*_blocks`)."""
    return any(_ORIGINAL_LAYOUT.match(key) for key in keys)


def to_diffusers(key: str) -> str:
    return _rename(key, _TO_DIFFUSERS)


def to_original(key: str) -> str:
    return _rename(key, _TO_ORIGINAL)


def _rename(key: str, rules) -> str:
    for pattern, replacement in rules:
        renamed, count = pattern.subn(replacement, key, count=1)
        if count:
            return renamed
    return key
