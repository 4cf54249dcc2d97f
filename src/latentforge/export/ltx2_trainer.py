"""The LTX-2 trainer's precomputed video latent for one cache sample (`--to ltx2-trainer`).

The LTX-2 trainer (Lightricks/LTX-2 400fd31, packages/ltx-trainer) trains from a preprocessed data root holding
`latents/` and `conditions/`, one `.pt` dict per sample in each under the same relative name
(ltx_trainer/datasets.py PrecomputedDataset). Its own preprocessing (scripts/process_videos.py compute_latents)
saves, per video, `{"latents": [C, F', H', W'], "num_frames": F', "height": H', "width": W', "fps": float}`: the
grid as Python ints, fps the latent's frame rate, the tensor as ltx-core's VideoEncoder returns it with the VAE
loaded in bfloat16: the posterior mean normalised per channel, `(mu - mean-of-means) / std-of-means`, with no
scaling factor (ltx_core/model/video_vae/video_vae.py VideoEncoder.forward, ops.py PerChannelStatistics).

A cache holds `(mu - latents_mean) * scaling_factor / latents_std` with the same VAE's statistics (diffusers'
AutoencoderKLLTX2Video buffers, converted from those), so the file holds `latent / scaling_factor` rounded to
bfloat16. The cache must record that normalisation, else nothing says its numbers are the trainer's. No
conditions are written: the trainer's text features come from its Gemma encoder, which no cache holds.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..cache.config_file import CacheConfig
from ..errors import ConfigError
from .files import ExportFile

LTX2_TRAINER = "ltx2-trainer"
LTX2_CHANNELS = 128  # the LTX-2 video VAE's latent channels, which its DiT's patchify_proj takes
LATENTS_DIR = "latents"  # PrecomputedDataset's default source for the video latents (and "conditions" for text)
TRAINER_DTYPE = torch.bfloat16  # process_videos.py loads the VAE in bfloat16 and saves its output uncast
# the normalisation an ltx2 cache records (tokenizers/ltx/channel_stats.py): what the conversion undoes
CACHE_NORMALISATION = "posterior mean mu, (mu - latents_mean) * scaling_factor / latents_std per channel"


def cache_scaling_factor(config: CacheConfig, target: str) -> float:
    """The factor the cache's latents carry beyond the trainer's normalisation; refuses a cache whose record
    does not say its latents are the VAE's per-channel normalised mean (the LTX-Video and LTX-2 VAEs alike)."""
    recorded = config.tokenizer
    factor = recorded.get("scaling_factor")
    mean, std = recorded.get("latents_mean"), recorded.get("latents_std")
    problem = None
    if recorded.get("latent") != CACHE_NORMALISATION:
        problem = f"records its latent as {recorded.get('latent')!r}, not {CACHE_NORMALISATION!r}"
    elif not isinstance(factor, (int, float)) or not math.isfinite(factor) or factor <= 0:
        problem = f"records scaling_factor {factor!r}, not a positive number"
    elif not all(isinstance(each, list) and len(each) == LTX2_CHANNELS for each in (mean, std)):
        problem = f"does not record {LTX2_CHANNELS} latents_mean and latents_std values"
    elif not all(isinstance(value, (int, float)) and value > 0 for value in std):
        problem = "records a latents_std that is not positive"
    if problem is not None:
        raise ConfigError(f"the cache's cache_config.json tokenizer section {problem}; the {target} target "
                          "writes the trainer's (mu - mean) / std latents and can only convert those")
    return float(factor)


def ltx2_trainer_files(config: CacheConfig, index: int, item: dict[str, Any], fps: float) -> list[ExportFile]:
    factor = cache_scaling_factor(config, LTX2_TRAINER)
    latent = item["latent"]
    stem = f"{index:09d}"
    if latent.shape[0] != LTX2_CHANNELS:
        raise ConfigError(f"sample {stem} ({item['sample_id']}): the exported latent has {latent.shape[0]} channels, "
                          f"and the LTX-2 video DiT takes {LTX2_CHANNELS}, one modality of an ltx2 cache; export "
                          "one (--modality rgb)")
    if not math.isfinite(fps) or fps <= 0:
        raise ConfigError(f"sample {stem} ({item['sample_id']}): its frame rate is unknown, and the LTX-2 trainer "
                          "places latent frames in time by fps; build the cache with frames.fps set")
    latents = (latent.to(torch.float32) / factor).to(TRAINER_DTYPE).contiguous()  # a new tensor: owns its storage
    _, frames, height, width = latents.shape
    return [ExportFile(f"{LATENTS_DIR}/{stem}.pt", {"latents": latents, "num_frames": int(frames),
                                                     "height": int(height), "width": int(width), "fps": float(fps)})]
