"""Cosmos-Predict2 Video2World sample dicts served from a latent cache (docs/dataset.md, "Cosmos-Predict2").

Keys and dtypes are those of cosmos_predict2/data/dataset_video.py's `Dataset.__getitem__`, except that the
uint8 `video` is replaced by its cached latent under LATENT_KEY; the trainer-side change that uses it instead
of running the VAE is shown in docs/dataset.md.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, Sequence

import torch
from torch.utils.data import Dataset

from ..cache.expect import CacheExpectation
from ..errors import ConfigError
from ..sinks.hdf5.dataset import LatentCacheDataset

LATENT_KEY = "latent_state"  # named after the variable it replaces in Video2WorldPipeline.get_data_and_condition
COSMOS_T5_TOKENS = 512  # cosmos_predict2/data/dataset_utils.py _NUM_T5_TOKENS
COSMOS_T5_DIM = 1024  # cosmos_predict2/data/dataset_utils.py _T5_EMBED_DIM
COSMOS_DEFAULT_FPS = 16.0  # dataset_video.py falls back to 16 when the frame rate cannot be read
_COSMOS_TEXT = {"text_encoder": "t5", "text_dim": COSMOS_T5_DIM, "text_max_length": COSMOS_T5_TOKENS}


class CosmosVideo2WorldDataset(Dataset):
    """Items: LATENT_KEY (storage dtype [C, T', H', W']), `t5_text_embeddings` float32 [512, 1024] zero-padded,
    `t5_text_mask` int64 [512], `fps` float, `image_size` int64 [4] = (h, w, h, w), `num_frames` (pixel
    frames), `padding_mask` float32 zeros [1, H, W], `video_name` {video_path, t5_embedding_path}.
    """

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        modalities: Sequence[str] | None = None,
        expect: CacheExpectation | dict[str, Any] | None = None,
        *,
        require_complete: bool = True,
    ):
        expectation = CacheExpectation.coerce(expect)
        for field, needed in _COSMOS_TEXT.items():
            given = getattr(expectation, field)
            if given is not None and given != needed:
                raise ConfigError(f"expect.{field}={given!r}: Cosmos-Predict2 Video2World needs {needed!r}")
        expectation = dataclasses.replace(expectation, **_COSMOS_TEXT)
        self.latents = LatentCacheDataset(root, modalities, expectation, require_complete=require_complete)
        config = self.latents.config
        self.height, self.width, self.num_frames = config.height, config.width, config.num_frames
        # Resampled clips play at the target rate; others at the rate of their source.
        self.fixed_fps = None if config.fps in (None, "source") else float(config.fps)

    def __len__(self) -> int:
        return len(self.latents)

    def fps(self, index: int) -> float:
        if self.fixed_fps is not None:
            return self.fixed_fps
        fps = float(self.latents.index.source_fps[index])
        return fps if math.isfinite(fps) and fps > 0 else COSMOS_DEFAULT_FPS

    def __getitem__(self, index: int) -> dict[str, Any]:
        item = self.latents[index]
        index = item["dataset_index"]
        manifest = self.latents.index
        shard = manifest.shard_paths[manifest.shard_of[index]]
        text_dataset = self.latents.config.text.embeddings_dataset
        return {
            LATENT_KEY: item["latent"],
            "video_name": {
                "video_path": manifest.source_path[index],
                "t5_embedding_path": f"{shard}#{text_dataset}[{int(manifest.cache_row[index])}]",
            },
            "t5_text_embeddings": item["text_embeddings"].to(torch.float32),
            "t5_text_mask": item["text_mask"].to(torch.int64),
            "fps": self.fps(index),
            "image_size": torch.tensor([self.height, self.width, self.height, self.width], dtype=torch.int64),
            "num_frames": self.num_frames,
            "padding_mask": torch.zeros(1, self.height, self.width, dtype=torch.float32),
        }
