"""The image-to-video tensors of a musubi-tuner Wan latent file, taken from a cache sample's conditioning keys.

musubi-tuner (kohya-ss/musubi-tuner 30c658c, dataset/cache_io.py save_latent_cache_wan) writes beside
`latents_{F}x{H}x{W}_{dtype}`:
- `latents_image_{F}x{H}x{W}_{dtype}`: Wan's conditioning `y`, [4 + C, F', H', W'], exactly as the DiT takes it: a
  4-channel mask (ones on latent frame 0, zeros after) and then the normalised VAE latent of [frame 0, zeros].
- `clip_{dtype}`: the CLIP ViT-H/14 tokens of frame 0 ([257, 1280], the penultimate block's).
Both names carry the clip latent's grid and dtype name, whatever the extra tensor's own dtype (musubi saves its
float16 CLIP tokens as `clip_bfloat16` beside a bfloat16 latent). Its loader drops the dtype and grid from the
names (batch keys `latents_image`, `clip`) and its Wan trainer passes them to the DiT unchanged (`y=`,
`clip_fea=`), so the cache's 20-channel `image_cond_latent` is stored as it is: no conversion, no mask rebuilt.
"""

from __future__ import annotations

from typing import Any

import torch

from ..cache.conditioning_streams import CLIP_IMAGE_EMBEDS, IMAGE_COND_LATENT
from ..cache.conditioning_streams import MASK_CHANNELS as WAN_MASK_CHANNELS
from ..errors import ConfigError
from ..pipeline.conditioning import wan_i2v_mask

CLIP_KEY = CLIP_IMAGE_EMBEDS  # the training readers' sample keys (and the cache's dataset names)
Y_KEY = IMAGE_COND_LATENT
WAN_CLIP_WIDTH = 1280  # Wan's img_emb is an MLPProj(1280, dim): only ViT-H/14's 1280-wide tokens fit
# musubi-tuner's --task names for image-to-video and the sample keys each one trains on
MUSUBI_I2V_TASKS = {"i2v-14B": (CLIP_KEY, Y_KEY),  # Wan2.1 I2V-14B: CLIP tokens and y
                    "i2v-A14B": (Y_KEY,)}  # Wan2.2 I2V-A14B: y only (musubi skips CLIP for Wan2.2)
_BUILD_WITH = {CLIP_KEY: "conditioning.image_embeds=clip-vit-h14", Y_KEY: "conditioning.image_latent=wan-i2v"}


def musubi_i2v_tensors(name: str, item: dict[str, Any], latent: torch.Tensor,
                       task: str | None = None) -> dict[str, torch.Tensor]:
    """The `latents_image_*` and `clip_*` tensors of the sample `item` (named `name` in errors), beside its exported
    `latent` [C, F', H', W']: what the sample carries, as it carries it (the caller copies). `task` (a
    MUSUBI_I2V_TASKS key) also requires the streams that task trains on. A missing one, or one no Wan DiT takes,
    raises ConfigError."""
    missing = [key for key in MUSUBI_I2V_TASKS[task] if key not in item] if task is not None else []
    if missing:
        fixes = " and ".join(_BUILD_WITH[key] for key in missing)
        raise ConfigError(f"sample {name} has no {' or '.join(missing)}, which musubi-tuner's {task} training "
                          f"reads; build the cache with {fixes}")
    _, frames, height, width = latent.shape
    grid = f"{frames}x{height}x{width}_{musubi_dtype_name(latent)}"
    tensors: dict[str, torch.Tensor] = {}
    if CLIP_KEY in item:  # in musubi's order: clip, then latents_image
        tensors[f"clip_{musubi_dtype_name(latent)}"] = _checked_clip(name, item[CLIP_KEY])
    if Y_KEY in item:
        tensors[f"latents_image_{grid}"] = _checked_y(name, item[Y_KEY], latent)
    return tensors


def _checked_y(name: str, y: torch.Tensor, latent: torch.Tensor) -> torch.Tensor:
    channels, frames, height, width = latent.shape
    wanted = (WAN_MASK_CHANNELS + channels, frames, height, width)
    if tuple(y.shape) != wanted:
        raise ConfigError(f"sample {name}: {Y_KEY} is {list(y.shape)}, and the exported latent {list(latent.shape)} "
                          f"pairs with a y of {list(wanted)} (mask and VAE channels over its grid); export the "
                          "modality the conditioning latent was encoded from (--modality rgb)")
    if not torch.equal(y[:WAN_MASK_CHANNELS], wan_i2v_mask(1, frames, height, width, y.device)[0].to(y.dtype)):
        raise ConfigError(f"sample {name}: the first {WAN_MASK_CHANNELS} channels of {Y_KEY} are not Wan's "
                          "first-frame mask (ones on latent frame 0, zeros after), which musubi-tuner passes to the "
                          "DiT as it is; rebuild the cache with conditioning.image_latent=wan-i2v")
    return y


def _checked_clip(name: str, clip: torch.Tensor) -> torch.Tensor:
    if clip.dim() != 2 or clip.shape[1] != WAN_CLIP_WIDTH:
        raise ConfigError(f"sample {name}: {CLIP_KEY} is {list(clip.shape)}, and Wan2.1 I2V's image embedding takes "
                          f"[tokens, {WAN_CLIP_WIDTH}] (CLIP ViT-H/14); build the cache with "
                          f"{_BUILD_WITH[CLIP_KEY]}")
    return clip


def musubi_dtype_name(tensor: torch.Tensor) -> str:
    return str(tensor.dtype).split(".")[-1]  # "float16", as musubi-tuner's dtype_to_str
