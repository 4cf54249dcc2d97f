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

A cache with LTX-2 audio latents (`audio.tokenizer: ltx2-audio`) also gets the trainer's `audio_latents/` under the
same name (scripts/process_dataset.py, the sound of each video), `{"latents": [8, T, 16], "num_time_steps": T,
"frequency_bins": 16, "duration": float}` (process_videos.py _encode_audio): the audio VAE run in float32, its
posterior mean normalised over the packed [T, C*F] features by the VAE's own per-channel statistics (ltx_core
AudioEncoder._normalize_latents), which is exactly the cache's audio_latent. A video without sound gets no file, as
in the trainer's preprocessing, whose dataset then leaves it out of audio training.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..cache.audio_section import AudioSection
from ..cache.config_file import CacheConfig
from ..errors import ConfigError
from .files import ExportFile, own

LTX2_TRAINER = "ltx2-trainer"
LTX2_CHANNELS = 128  # the LTX-2 (and LTX-Video) VAE latent channels, which their transformers' patchify_proj takes
LATENTS_DIR = "latents"  # PrecomputedDataset's default source for the video latents (and "conditions" for text)
TRAINER_DTYPE = torch.bfloat16  # process_videos.py loads the VAE in bfloat16 and saves its output uncast
# the normalisation an ltx2 cache records (tokenizers/ltx/channel_stats.py): what the conversion undoes
CACHE_NORMALISATION = "posterior mean mu, (mu - latents_mean) * scaling_factor / latents_std per channel"
AUDIO_LATENTS_DIR = "audio_latents"  # process_dataset.py's folder for the audio of each video
AUDIO_LATENT_SHAPE = (8, 16)  # process_videos.py AUDIO_LATENT_CHANNELS, AUDIO_FREQUENCY_BINS: the DiT's 128 features
AUDIO_TRAINER_DTYPE = torch.float32  # process_videos.py loads the audio VAE in float32
AUDIO_TOKENIZER = "ltx2-audio"
# the normalisation an ltx2-audio latent records (tokenizers/ltx/ltx2_audio.py), the one ltx-core's encoder applies
AUDIO_NORMALISATION = ("posterior mean mu [C, L, M], packed to [L, C*M], (x - latents_mean) / latents_std per feature, "
                       "unpacked to [C, L, M] (LTX2Pipeline._pack_audio_latents, _normalize_audio_latents)")


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


def trainer_latent(config: CacheConfig, target: str, item: dict[str, Any], stem: str, fps: float, takes: str,
                   which: str, why_fps: str) -> torch.Tensor:
    """The sample's latent as the LTX trainers store it: `latent / scaling_factor` in bfloat16, a tensor of its own.
    Refuses a latent of other than LTX2_CHANNELS channels (`takes`: the model that takes them; `which`: the advice
    on which modality) and an unknown frame rate (`why_fps`: what the trainer uses it for)."""
    factor = cache_scaling_factor(config, target)
    latent = item["latent"]
    if latent.shape[0] != LTX2_CHANNELS:
        raise ConfigError(f"sample {stem} ({item['sample_id']}): the exported latent has {latent.shape[0]} channels, "
                          f"and {takes} takes {LTX2_CHANNELS}{which} (--modality rgb)")
    if not math.isfinite(fps) or fps <= 0:
        raise ConfigError(f"sample {stem} ({item['sample_id']}): its frame rate is unknown, and {why_fps}; build "
                          "the cache with frames.fps set")
    return (latent.to(torch.float32) / factor).to(TRAINER_DTYPE).contiguous()  # a new tensor: owns its storage


def ltx2_trainer_files(config: CacheConfig, index: int, item: dict[str, Any], fps: float) -> list[ExportFile]:
    stem = f"{index:09d}"
    latents = trainer_latent(config, LTX2_TRAINER, item, stem, fps, "the LTX-2 video DiT",
                             ", one modality of an ltx2 cache; export one",
                             "the LTX-2 trainer places latent frames in time by fps")
    _, frames, height, width = latents.shape
    files = [ExportFile(f"{LATENTS_DIR}/{stem}.pt", {"latents": latents, "num_frames": int(frames),
                                                      "height": int(height), "width": int(width), "fps": float(fps)})]
    sound = _trained_audio(config)
    if sound is not None and bool(item["audio_present"]):
        audio = own(item["audio_latent"]).to(AUDIO_TRAINER_DTYPE)
        _, steps, bins = audio.shape
        duration = sound.samples / sound.sample_rate  # the PCM the latent encodes: the window's
        files.append(ExportFile(f"{AUDIO_LATENTS_DIR}/{stem}.pt", {"latents": audio, "num_time_steps": int(steps),
                                                                    "frequency_bins": int(bins),
                                                                    "duration": float(duration)}))
    return files


def _trained_audio(config: CacheConfig) -> AudioSection | None:
    """The audio section of a cache with audio latents the trainer trains on, None without them; refuses latents it
    cannot take."""
    stream = None if config.audio is None else config.audio.latent
    if config.audio is None or stream is None:
        return None
    producer = stream.producer
    problem = None
    if producer.get("name") != AUDIO_TOKENIZER or producer.get("latent") != AUDIO_NORMALISATION:
        problem = (f"the cache's audio_latent comes from {producer.get('name')!r} recorded as "
                   f"{producer.get('latent')!r}, not {AUDIO_TOKENIZER}'s normalised mean; rebuild with "
                   f"audio.tokenizer={AUDIO_TOKENIZER}")
    elif (stream.shape[0], stream.shape[-1]) != AUDIO_LATENT_SHAPE:
        problem = (f"the cache's audio_latent is {list(stream.shape)}, and the LTX-2 DiT takes "
                   f"[{AUDIO_LATENT_SHAPE[0]}, T, {AUDIO_LATENT_SHAPE[1]}]; rebuild with LTX-2's own audio VAE "
                   "(audio.checkpoint)")
    elif config.fps == "source":
        problem = ("the cache was built at frames.fps=source, so its audio latents span audio.max_seconds, not each "
                   "video's duration as the trainer's do; rebuild with frames.fps set")
    if problem is not None:
        raise ConfigError(f"{problem} (the {LTX2_TRAINER} target writes the trainer's audio_latents/)")
    return config.audio
