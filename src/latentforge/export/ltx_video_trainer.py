"""The LTX-Video trainer's precomputed video latent for one cache sample (`--to ltx-video-trainer`).

The LTX-Video trainer (Lightricks/LTX-Video-Trainer 31b1273) trains LTX-Video 0.9.x from a preprocessed data root
holding `latents/` and `conditions/`, one `.pt` dict per sample in each under the same relative name
(src/ltxv_trainer/datasets.py PrecomputedDataset, loaded with `torch.load(..., weights_only=True)`). Its own
preprocessing (scripts/process_videos.py compute_video_latents, src/ltxv_trainer/ltxv_utils.py encode_video) saves
per video `{"latents": [F'·H'·W', 128], "num_frames": F', "height": H', "width": W', "fps": float}`: the latent
grid as Python ints, the video's frame rate, and the latent packed into a sequence of tokens (pack_latents with
patch sizes 1: frame-major, then row, then column, channels last) after `_normalize_latents`, `(z - latents_mean)
/ latents_std` per channel with no scaling factor, in bfloat16 (the VAE is loaded in bfloat16, its output saved
uncast).

A cache holds `(mu - latents_mean) * scaling_factor / latents_std` with the same VAE's statistics, so the file
holds `latent / scaling_factor` rounded to bfloat16 and packed. The trainer samples the posterior
(`latent_dist.sample`); a cache holds its mean. No conditions are written: the trainer's T5-XXL text features come
from its own caption preprocessing, which no cache holds.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..cache.config_file import CacheConfig
from ..errors import ConfigError
from .files import ExportFile
from .ltx2_trainer import cache_scaling_factor

LTX_VIDEO_TRAINER = "ltx-video-trainer"
LTX_VIDEO_CHANNELS = 128  # the LTX-Video VAE's latent channels, which its transformer's patchify_proj takes
LATENTS_DIR = "latents"  # PrecomputedDataset's source for the video latents ("conditions" for the text)
TRAINER_DTYPE = torch.bfloat16


def pack(latent: torch.Tensor) -> torch.Tensor:
    """[C, F, H, W] -> [F·H·W, C]: the trainer's pack_latents with patch sizes 1, one sample."""
    return latent.permute(1, 2, 3, 0).flatten(0, 2)


def ltx_video_trainer_files(config: CacheConfig, index: int, item: dict[str, Any], fps: float) -> list[ExportFile]:
    factor = cache_scaling_factor(config, LTX_VIDEO_TRAINER)
    latent = item["latent"]
    stem = f"{index:09d}"
    if latent.shape[0] != LTX_VIDEO_CHANNELS:
        raise ConfigError(f"sample {stem} ({item['sample_id']}): the exported latent has {latent.shape[0]} channels, "
                          f"and the LTX-Video transformer takes {LTX_VIDEO_CHANNELS}; export the ltx-video "
                          "tokenizer's modality (--modality rgb)")
    if not math.isfinite(fps) or fps <= 0:
        raise ConfigError(f"sample {stem} ({item['sample_id']}): its frame rate is unknown, and the LTX-Video "
                          "trainer scales its rotary positions by fps; build the cache with frames.fps set")
    _, frames, height, width = latent.shape
    tokens = pack((latent.to(torch.float32) / factor).to(TRAINER_DTYPE)).contiguous()  # a new tensor of its own
    return [ExportFile(f"{LATENTS_DIR}/{stem}.pt", {"latents": tokens, "num_frames": int(frames),
                                                     "height": int(height), "width": int(width), "fps": float(fps)})]
