"""The official HunyuanVideo VAE config.json, read as diffusers' config of the same model.

The official releases ship a `vae/config.json` of their own module's arguments, which the official loaders build the
model from (`AutoencoderKLCausal3D.from_config` in Tencent-Hunyuan/HunyuanVideo `hyvideo/vae/__init__.py`;
`AutoencoderKLConv3D.from_pretrained` in Tencent-Hunyuan/HunyuanVideo-1.5). Each argument that shapes the model has
a diffusers counterpart of the same meaning (the same layer rules, read in both sources); the tile sizes
(`sample_size`, `sample_tsize`) and the dtype hint `force_upcast` shape nothing and are dropped. A key not known
here, a block type other than the causal one, or a `shift_factor` (diffusers' class and latentforge's latent have
none) is refused, as is a missing key whose official default differs from diffusers'.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..checkpoints import CheckpointError

_SAME = ("in_channels", "out_channels", "latent_channels", "block_out_channels", "layers_per_block",
         "scaling_factor")
# official class -> (official key -> diffusers key (None: dropped), official defaults a release may leave out)
OFFICIAL_CONFIGS: dict[str, tuple[dict[str, str | None], dict[str, Any]]] = {
    "AutoencoderKLCausal3D": (
        {**{k: k for k in _SAME}, "act_fn": "act_fn", "norm_num_groups": "norm_num_groups",
         "down_block_types": "down_block_types", "up_block_types": "up_block_types",
         "spatial_compression_ratio": "spatial_compression_ratio", "time_compression_ratio":
         "temporal_compression_ratio", "mid_block_add_attention": "mid_block_add_attention",
         "sample_size": None, "sample_tsize": None, "force_upcast": None},
        {"spatial_compression_ratio": 8},
    ),
    "AutoencoderKLConv3D": (
        {**{k: k for k in _SAME}, "ffactor_spatial": "spatial_compression_ratio",
         "ffactor_temporal": "temporal_compression_ratio", "downsample_match_channel": "downsample_match_channel",
         "upsample_match_channel": "upsample_match_channel", "sample_size": None, "sample_tsize": None,
         "shift_factor": None},
        {"downsample_match_channel": True, "upsample_match_channel": True, "shift_factor": None},
    ),
}
# HunyuanVideo (1.0): the official block types and diffusers' blocks of the same layers
_BLOCK_TYPES = {"DownEncoderBlockCausal3D": "HunyuanVideoDownBlock3D",
                "UpDecoderBlockCausal3D": "HunyuanVideoUpBlock3D"}


def diffusers_config(official: dict[str, Any], path: Path, model_class: str) -> dict[str, Any]:
    """The diffusers `model_class` config of the official config.json `official` (read from `path`)."""
    names, defaults = OFFICIAL_CONFIGS[official["_class_name"]]
    settings = {**defaults, **{k: v for k, v in official.items() if not k.startswith("_")}}
    unknown = sorted(set(settings) - set(names))
    missing = sorted(set(names) - set(settings) - {k for k, v in names.items() if v is None})
    if unknown or missing:
        raise CheckpointError(
            f"{path} is an official {official['_class_name']} config, but "
            + "; ".join(f"{label} {', '.join(keys)}" for label, keys in (("it has the unknown keys", unknown),
                                                                      ("it lacks", missing)) if keys)
            + f" (known: {', '.join(sorted(names))}); pass the config.json of the official release"
        )
    if settings.get("shift_factor") is not None:
        raise CheckpointError(
            f"{path} sets shift_factor={settings['shift_factor']}, which diffusers' {model_class} and latentforge's "
            "latent (mean * scaling_factor) do not have; pass the config.json of the official release"
        )
    config = {names[k]: v for k, v in settings.items() if names[k] is not None}
    for key in ("down_block_types", "up_block_types"):
        if key in config:
            config[key] = [_block_type(name, path) for name in config[key]]
    return {"_class_name": model_class, **config}


def _block_type(name: str, path: Path) -> str:
    if name not in _BLOCK_TYPES:
        raise CheckpointError(f"{path} names the block type {name!r}; the official HunyuanVideo VAE's are "
                              f"{', '.join(_BLOCK_TYPES)}")
    return _BLOCK_TYPES[name]
