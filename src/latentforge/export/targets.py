"""What one cache sample becomes in each export target: file names and tensor dicts.

- `musubi`: musubi-tuner's Wan cache (Wan2.1 VAE latents only). Per sample, a latent file
  `{stem}_{start:05d}-{frames:03d}_{W:04d}x{H:04d}_wan.safetensors` holding `latents_{F}x{H'}x{W'}_{dtype}`
  ([C, F, H', W']) and a text file `{stem}_wan_te.safetensors` holding `varlen_t5_{dtype}` (the valid tokens only,
  [length, D], as Wan's T5 returns them); safetensors metadata as musubi-tuner writes it. A sample carrying
  image-to-video conditioning also gets `latents_image_*` and `clip_*` in its latent file (musubi_i2v.py).
- `pt-dicts`: generic per-sample `.pt` dicts under the keys of latentforge's own Dataset items,
  `latents/{stem}.pt` = {latent [C, F, H', W'], fps} and `text/{stem}.pt` = {text_embeddings [max_length, D]
  zero-padded, text_length, text_mask bool [max_length], prompt}. No trainer's own layout (the LTX-2 trainer's is
  `ltx2-trainer`).
- `musubi-hunyuanvideo`: musubi-tuner's HunyuanVideo latent files, no text (musubi_hunyuanvideo.py).
- `ltx2-trainer`: the LTX-2 trainer's precomputed video latents and, where the cache holds them, audio latents; no
  text conditions (ltx2_trainer.py).
- `ltx-video-trainer`: the LTX-Video trainer's packed precomputed video latents, no text conditions
  (ltx_video_trainer.py).
`stem` is the sample's dataset_index, nine digits, so file names never depend on ids. Every tensor is written
from a copy of its own (files.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from ..cache.config_file import CacheConfig
from .files import ExportFile, own
from .ltx2_trainer import LTX2_TRAINER, ltx2_trainer_files
from .ltx_video_trainer import LTX_VIDEO_TRAINER, ltx_video_trainer_files
from .musubi_hunyuanvideo import MUSUBI_HUNYUANVIDEO, musubi_hunyuanvideo_files
from .musubi_i2v import musubi_dtype_name, musubi_i2v_tensors

MUSUBI, PT_DICTS = "musubi", "pt-dicts"
RENAMED = {"pt": PT_DICTS}  # old name -> new name: refused with a message naming the new one
_MUSUBI_ARCHITECTURE = "wan"  # musubi-tuner's ARCHITECTURE_WAN (short name) and ARCHITECTURE_WAN_FULL
_MUSUBI_FORMAT_VERSION = "1.0.1"
WAN_TEXT_WIDTH = 4096  # every Wan DiT's text_embedding takes umT5-XXL's 4096-wide states (text_dim=4096)


def wan_text_width_problem(config: CacheConfig) -> str | None:
    """Why a Wan DiT cannot take this cache's text, or None: its text_embedding is a Linear(4096, dim), so any
    other width exports fine and then fails inside the model's first matmul."""
    if config.text is None or config.text.dim == WAN_TEXT_WIDTH:
        return None
    return (f"the cache's text embeddings ({config.text.name}) are {config.text.dim} wide, and every Wan DiT takes "
            f"{WAN_TEXT_WIDTH}-wide umT5 text; build the cache with text.name=umt5 (--text umt5)")


def musubi_files(config: CacheConfig, index: int, item: dict[str, Any], fps: float,
                 task: str | None = None) -> list[ExportFile]:
    """`task`, one of musubi_i2v.MUSUBI_I2V_TASKS, refuses a sample without the streams that task trains on."""
    latent = own(item["latent"])
    _, frames, height, width = latent.shape
    stem = f"{index:09d}"
    extras = musubi_i2v_tensors(f"{stem} ({item['sample_id']})", item, latent, task)
    pixels = f"{config.num_frames:03d}_{config.width:04d}x{config.height:04d}"
    latent_file = ExportFile(
        f"{stem}_00000-{pixels}_{_MUSUBI_ARCHITECTURE}.safetensors",
        {f"latents_{frames}x{height}x{width}_{musubi_dtype_name(latent)}": latent,
         **{key: own(value) for key, value in extras.items()}},
        {"architecture": _MUSUBI_ARCHITECTURE, "width": str(config.width), "height": str(config.height),
         "format_version": _MUSUBI_FORMAT_VERSION, "frame_count": str(config.num_frames)},
    )
    length = int(item["text_length"])
    text = own(item["text_embeddings"][:length])
    text_file = ExportFile(
        f"{stem}_{_MUSUBI_ARCHITECTURE}_te.safetensors",
        {f"varlen_t5_{musubi_dtype_name(text)}": text},
        {"architecture": _MUSUBI_ARCHITECTURE, "caption1": item["prompt"], "format_version": _MUSUBI_FORMAT_VERSION},
    )
    return [latent_file, text_file]


def pt_dict_files(config: CacheConfig, index: int, item: dict[str, Any], fps: float) -> list[ExportFile]:
    stem = f"{index:09d}"
    latents: dict[str, Any] = {"latent": own(item["latent"])}
    if math.isfinite(fps):
        latents["fps"] = fps
    text = {"text_embeddings": own(item["text_embeddings"]), "text_length": own(item["text_length"]),
            "text_mask": own(item["text_mask"]), "prompt": item["prompt"]}
    return [ExportFile(f"latents/{stem}.pt", latents), ExportFile(f"text/{stem}.pt", text)]


FilesOf = Callable[[CacheConfig, int, dict[str, Any], float], list[ExportFile]]


@dataclass(frozen=True)
class ExportTarget:
    """What a target writes per sample, and what it can take: the latent families (tokenizers' `latent_family`) its
    trainer reads, None for any, and whether it needs the cache's text embeddings."""

    files: FilesOf
    families: frozenset[str] | None
    needs_text: bool


TARGETS: dict[str, ExportTarget] = {
    # musubi-tuner trains Wan2.1 and Wan2.2-A14B models, both on the Wan2.1 VAE's latents; it has no Wan2.2 TI2V-5B task
    MUSUBI: ExportTarget(musubi_files, frozenset({"wan2.1"}), True),
    MUSUBI_HUNYUANVIDEO: ExportTarget(musubi_hunyuanvideo_files, frozenset({"hunyuanvideo"}), False),
    # the LTX-2 trainer trains LTX-2 on its own video VAE's latents; its text conditions come from its Gemma encoder
    LTX2_TRAINER: ExportTarget(ltx2_trainer_files, frozenset({"ltx2"}), False),
    # the LTX-Video trainer trains LTX-Video 0.9.x on its VAE's latents; its text conditions come from its T5-XXL
    LTX_VIDEO_TRAINER: ExportTarget(ltx_video_trainer_files, frozenset({"ltx-video"}), False),
    PT_DICTS: ExportTarget(pt_dict_files, None, True),
}
