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

from typing import Any

import torch

from ..cache.config_file import CacheConfig
from .files import ExportFile
from .ltx2_trainer import trainer_latent

LTX_VIDEO_TRAINER = "ltx-video-trainer"
LATENTS_DIR = "latents"  # PrecomputedDataset's source for the video latents ("conditions" for the text)


def pack(latent: torch.Tensor) -> torch.Tensor:
    """[C, F, H, W] -> [F·H·W, C]: the trainer's pack_latents with patch sizes 1, one sample."""
    return latent.permute(1, 2, 3, 0).flatten(0, 2)


def ltx_video_trainer_files(config: CacheConfig, index: int, item: dict[str, Any], fps: float) -> list[ExportFile]:
    stem = f"{index:09d}"
    latent = trainer_latent(config, LTX_VIDEO_TRAINER, item, stem, fps, "the LTX-Video transformer",
                            "; export the ltx-video tokenizer's modality",
                            "the LTX-Video trainer scales its rotary positions by fps")
    _, frames, height, width = latent.shape
    tokens = pack(latent).contiguous()
    return [ExportFile(f"{LATENTS_DIR}/{stem}.pt", {"latents": tokens, "num_frames": int(frames),
                                                     "height": int(height), "width": int(width), "fps": float(fps)})]
