"""Spatial tiling of the diffusers-class VAEs (tokenizer.tiling=spatial), for clips whose whole-clip encode does not
fit in memory: diffusers' own tiled encode and decode, with the tile rule given as two numbers in pixels.

Tiles are `tile_size` x `tile_size` pixels, started every `tile_stride` pixels down and across; each is encoded
alone and neighbours are blended linearly over the overlap (tile_size - tile_stride pixels, divided by the spatial
factor in the latent). A clip no larger than one tile in both height and width is encoded whole. Tiling changes
the latent, so the rule is part of the function: recorded in the fingerprint and in the resume key.

diffusers' classes take the rule in two ways: HunyuanVideo and LTX as a size and a stride
(`tile_sample_min_*`, `tile_sample_stride_*`), HunyuanVideo 1.5 as a size and an overlap factor
(`tile_overlap_factor`, stride = int(size * (1 - factor))). A stride the factor cannot give exactly is refused.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

TILING_OFF, TILING_SPATIAL = "off", "spatial"
TILING_MODES = (TILING_OFF, TILING_SPATIAL)
WHOLE_CLIP = "none: the whole clip in one call"  # the fingerprint's record without tiling


@dataclass(frozen=True)
class TileRule:
    size: int  # pixels, height and width of a tile
    stride: int  # pixels from one tile's start to the next, down and across

    def record(self, spatial_factor: int) -> dict[str, Any]:
        """The fingerprint's record: everything that decides which pixels each latent position blends."""
        return {"mode": TILING_SPATIAL, "tile_size": self.size, "tile_stride": self.stride,
                "blend_latent": (self.size - self.stride) // spatial_factor,
                "rule": "tiles of tile_size^2 pixels every tile_stride pixels, encoded alone, blended linearly over "
                        "the overlap (diffusers' tiled_encode / tiled_decode); a clip no larger than one tile is "
                        "encoded whole"}


def tile_rule(tiling: str, size: int | None, stride: int | None, default: tuple[int, int],
              spatial_factor: int, model_class: type) -> TileRule | None:
    """The rule the keys tokenizer.tiling / tile_size / tile_stride give (None: no tiling), or ConfigError naming
    the key, its value and what is allowed. `default` is the (size, stride) of diffusers' class."""
    if tiling not in TILING_MODES:
        raise ConfigError(f"tokenizer.tiling={tiling!r} is not allowed; allowed: {', '.join(TILING_MODES)}")
    if tiling == TILING_OFF:
        for key, value in (("tile_size", size), ("tile_stride", stride)):
            if value is not None:
                raise ConfigError(f"tokenizer.{key}={value} needs tokenizer.tiling={TILING_SPATIAL}; it is "
                                  f"{TILING_OFF} (drop {key}, or set tiling={TILING_SPATIAL})")
        return None
    rule = TileRule(default[0] if size is None else size, default[1] if stride is None else stride)
    for key, value in (("tile_size", rule.size), ("tile_stride", rule.stride)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0 or value % spatial_factor:
            raise ConfigError(f"tokenizer.{key}={value!r} is not allowed; allowed: a positive multiple of the "
                              f"spatial factor {spatial_factor} (pixels)")
    if rule.stride > rule.size:
        raise ConfigError(f"tokenizer.tile_stride={rule.stride} is not allowed with tile_size={rule.size}; allowed: "
                          f"at most tile_size (tiles must meet or overlap)")
    if takes_overlap_factor(model_class) and overlap_factor(rule, spatial_factor) is None:
        exact = [stride for stride in range(spatial_factor, rule.size + 1, spatial_factor)
                 if overlap_factor(TileRule(rule.size, stride), spatial_factor) is not None]
        raise ConfigError(f"tokenizer.tile_stride={rule.stride} with tile_size={rule.size} is not allowed for "
                          f"{model_class.__name__}, which takes the overlap as a fraction of the tile and cannot "
                          f"give that stride exactly; allowed with this tile_size: {', '.join(map(str, exact))}")
    return rule


def takes_overlap_factor(model_class: type) -> bool:
    return "tile_overlap_factor" in inspect.signature(model_class.enable_tiling).parameters


def overlap_factor(rule: TileRule, spatial_factor: int) -> float | None:
    """The factor from which diffusers' overlap-factor classes compute exactly this rule's stride and latent blend,
    or None where float arithmetic cannot."""
    factor = (rule.size - rule.stride) / rule.size
    latent_size = rule.size // spatial_factor
    exact = int(rule.size * (1 - factor)) == rule.stride \
        and int(latent_size * factor) == (rule.size - rule.stride) // spatial_factor
    return factor if exact else None


def enable_tiling(model: Any, rule: TileRule, spatial_factor: int) -> None:
    """Switch `model`'s spatial tiling on with `rule`, in whichever form its class takes it. diffusers' tiled encode
    divides tile sizes by the compression ratio the model states (its config's, or one derived from the block
    layout), which must then be the one the model computes."""
    stated = getattr(model, "spatial_compression_ratio", spatial_factor)
    if stated != spatial_factor:
        raise ConfigError(f"tokenizer.tiling={TILING_SPATIAL}: the VAE's config states a spatial compression ratio of "
                          f"{stated}, and it compresses by {spatial_factor}; diffusers' tiled encode would cut its "
                          "latent tiles wrong. Set spatial_compression_ratio in its config.json, or leave tiling off")
    if takes_overlap_factor(type(model)):
        model.enable_tiling(tile_sample_min_height=rule.size, tile_sample_min_width=rule.size,
                            tile_latent_min_height=rule.size // spatial_factor,
                            tile_latent_min_width=rule.size // spatial_factor,
                            tile_overlap_factor=overlap_factor(rule, spatial_factor))
        # enable_tiling keeps its old factor for a falsy one: tiles that only meet (factor 0) are set here
        model.tile_overlap_factor = overlap_factor(rule, spatial_factor)
    else:
        model.enable_tiling(tile_sample_min_height=rule.size, tile_sample_min_width=rule.size,
                            tile_sample_stride_height=rule.stride, tile_sample_stride_width=rule.stride)
