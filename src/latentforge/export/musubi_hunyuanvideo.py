"""musubi-tuner's HunyuanVideo latent file for one cache sample (`--to musubi-hunyuanvideo`).

musubi-tuner (kohya-ss/musubi-tuner 30c658c) caches, per video window, `latents_{F}x{H}x{W}_{dtype}` [16, F, H, W]
in `{item_key}_{start:05d}-{frames:03d}_{W:04d}x{H:04d}_hv.safetensors` (dataset/cache_io.py save_latent_cache,
metadata by save_latent_cache_common, architecture "hunyuan_video"). The tensor is the VAE's posterior *sample*,
unscaled (cache_latents.py encode_and_save_batch: `latent_dist.sample()`, the scaling left out), and its trainer
multiplies it by SCALING_FACTOR = 0.476986 (hv_train_network.py scale_shift_latents, hunyuan_model/vae.py).

A cache holds the posterior mean scaled by the same factor, so the file holds `latent / scaling_factor` in float32:
musubi's float32 product gives the cache's latent back to within float32 rounding (far below the storage dtype's
step). It is the mean, not a sample: a random draw cannot be reproduced. No text file is written: HunyuanVideo
trains on LLaVA-Llama-3 and CLIP-L features, which no cache holds; musubi-tuner's own text caching writes them.
"""

from __future__ import annotations

from typing import Any

import torch

from ..cache.config_file import CacheConfig
from ..errors import ConfigError
from .files import ExportFile

MUSUBI_HUNYUANVIDEO = "musubi-hunyuanvideo"
MUSUBI_SCALING_FACTOR = 0.476986  # musubi-tuner's hunyuan_model/vae.py SCALING_FACTOR
HUNYUANVIDEO_CHANNELS = 16  # the DiT's latent channels (hv_train_network.py: num_channels_latents = 16)
_ARCHITECTURE, _ARCHITECTURE_FULL = "hv", "hunyuan_video"  # musubi's ARCHITECTURE_HUNYUAN_VIDEO(_FULL)
_FORMAT_VERSION = "1.0.1"


def musubi_hunyuanvideo_files(config: CacheConfig, index: int, item: dict[str, Any], fps: float) -> list[ExportFile]:
    latent = item["latent"]
    stem = f"{index:09d}"
    if latent.shape[0] != HUNYUANVIDEO_CHANNELS:
        raise ConfigError(f"sample {stem} ({item['sample_id']}): the exported latent has {latent.shape[0]} channels, "
                          f"and HunyuanVideo's DiT takes {HUNYUANVIDEO_CHANNELS}; export one modality (--modality rgb)")
    scaling_factor = config.tokenizer.get("scaling_factor")
    if scaling_factor != MUSUBI_SCALING_FACTOR:
        raise ConfigError(f"the cache's latents were scaled by {scaling_factor} (cache_config.json tokenizer."
                          f"scaling_factor), and musubi-tuner's HunyuanVideo trainer multiplies by "
                          f"{MUSUBI_SCALING_FACTOR}: its files would train on other numbers")
    unscaled = latent.to(torch.float32) / scaling_factor  # a new tensor: owns its storage
    _, frames, height, width = unscaled.shape
    pixels = f"{config.num_frames:03d}_{config.width:04d}x{config.height:04d}"
    return [ExportFile(
        f"{stem}_00000-{pixels}_{_ARCHITECTURE}.safetensors",
        {f"latents_{frames}x{height}x{width}_float32": unscaled.contiguous()},
        {"architecture": _ARCHITECTURE_FULL, "width": str(config.width), "height": str(config.height),
         "format_version": _FORMAT_VERSION, "frame_count": str(config.num_frames)},
    )]
