"""What one cache sample becomes in each trainer's own per-sample cache: file names and tensor dicts.

- `musubi`: musubi-tuner's Wan cache. Per sample, a latent file
  `{stem}_{start:05d}-{frames:03d}_{W:04d}x{H:04d}_wan.safetensors` holding `latents_{F}x{H'}x{W'}_{dtype}`
  ([C, F, H', W']) and a text file `{stem}_wan_te.safetensors` holding `varlen_t5_{dtype}` (the valid tokens only,
  [length, D], as Wan's T5 returns them); safetensors metadata as musubi-tuner writes it.
- `pt`: the LTX-2 trainer's precomputed layout, `.precomputed/latents/{stem}.pt` =
  {latents [C, F, H', W'], num_frames, height, width, fps} and `.precomputed/conditions/{stem}.pt` =
  {prompt_embeds [max_length, D] zero-padded, prompt_attention_mask bool [max_length]}.
`stem` is the sample's dataset_index, nine digits, so file names never depend on ids.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from ..cache.config_file import CacheConfig

MUSUBI, PT = "musubi", "pt"
TARGETS = (MUSUBI, PT)
_MUSUBI_ARCHITECTURE = "wan"  # musubi-tuner's ARCHITECTURE_WAN (short name) and ARCHITECTURE_WAN_FULL
_MUSUBI_FORMAT_VERSION = "1.0.1"
PRECOMPUTED = ".precomputed"


@dataclass(frozen=True)
class ExportFile:
    """One file to write: its path relative to the export folder, its tensors and its string metadata."""

    rel: str
    tensors: dict[str, Any]
    metadata: dict[str, str] | None = None  # safetensors only

    @property
    def is_safetensors(self) -> bool:
        return self.rel.endswith(".safetensors")


def _dtype_name(tensor: torch.Tensor) -> str:
    return str(tensor.dtype).split(".")[-1]  # "float16", as musubi-tuner's dtype_to_str


def musubi_files(config: CacheConfig, index: int, item: dict[str, Any]) -> list[ExportFile]:
    latent = item["latent"].contiguous()
    _, frames, height, width = latent.shape
    stem = f"{index:09d}"
    pixels = f"{config.num_frames:03d}_{config.width:04d}x{config.height:04d}"
    latent_file = ExportFile(
        f"{stem}_00000-{pixels}_{_MUSUBI_ARCHITECTURE}.safetensors",
        {f"latents_{frames}x{height}x{width}_{_dtype_name(latent)}": latent},
        {"architecture": _MUSUBI_ARCHITECTURE, "width": str(config.width), "height": str(config.height),
         "format_version": _MUSUBI_FORMAT_VERSION, "frame_count": str(config.num_frames)},
    )
    length = int(item["text_length"])
    text = item["text_embeddings"][:length].contiguous()
    text_file = ExportFile(
        f"{stem}_{_MUSUBI_ARCHITECTURE}_te.safetensors",
        {f"varlen_t5_{_dtype_name(text)}": text},
        {"architecture": _MUSUBI_ARCHITECTURE, "caption1": item["prompt"], "format_version": _MUSUBI_FORMAT_VERSION},
    )
    return [latent_file, text_file]


def pt_files(config: CacheConfig, index: int, item: dict[str, Any], fps: float) -> list[ExportFile]:
    latent = item["latent"].contiguous()
    _, frames, height, width = latent.shape
    stem = f"{index:09d}"
    latents = {"latents": latent, "num_frames": frames, "height": height, "width": width}
    if math.isfinite(fps):
        latents["fps"] = fps
    conditions = {"prompt_embeds": item["text_embeddings"].contiguous(),
                  "prompt_attention_mask": item["text_mask"].contiguous()}
    return [ExportFile(f"{PRECOMPUTED}/latents/{stem}.pt", latents),
            ExportFile(f"{PRECOMPUTED}/conditions/{stem}.pt", conditions)]
