"""The CLIP image embedding near-duplicate removal compares (dedup.model): one unit vector per frame.

It is the standard CLIP image embedding as transformers computes it: `CLIPVisionModelWithProjection(...).image_embeds`
(the class token after the last layer norm, through the visual projection) when the checkpoint holds the
projection (the official Wan file's `visual.head`, a folder's `visual_projection.weight`), else
`CLIPVisionModel(...).pooler_output` (the same token without it). The checkpoint routes and the preprocessing are
those of the clip-vit-h14 image tokens (clip_checkpoint.py, clip_preprocess.py). Computed in float32 with TF32 off
and L2-normalised in float64 on the host, so the vectors depend on the device only through its float32 kernels.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..devices import tf32_off
from .clip_checkpoint import (
    ClipSource,
    check_sha256,
    checkpoint_sha256,
    has_projection,
    image_size,
    load_model,
    resolve,
)
from .clip_preprocess import OfficialPreprocess, ProcessorPreprocess

NAME = "clip-vit-h14"
PATH_KEY, SHA256_KEY = "dedup.model", "dedup.sha256"


def _preprocess(source: ClipSource, size: int) -> ProcessorPreprocess | OfficialPreprocess:
    if source.kind == "wan-official":
        return OfficialPreprocess(size)
    return ProcessorPreprocess(source.processor_folder, size)


class ClipImageEmbedder:
    """uint8 RGB frames -> their CLIP image embeddings, float32 [B, D] rows of unit length."""

    def __init__(self, source: ClipSource, sha256: str, device: torch.device | str):
        self.source, self.sha256 = source, sha256
        self.device = torch.device(device)
        self.model = load_model(source, embedding=True).to(self.device, torch.float32)
        self.projected = hasattr(self.model, "visual_projection")
        self.image_size = int(self.model.config.image_size)
        self.preprocess = _preprocess(source, self.image_size)

    @staticmethod
    def preflight(path: str, expected_sha256: str | None) -> None:
        """The route, the files and their SHA-256, before a build writes anything (the weights load when a window
        needs its embedding)."""
        check_sha256(resolve(path, PATH_KEY), expected_sha256, SHA256_KEY)

    @staticmethod
    def checkpoint_digest(path: str) -> str:
        return checkpoint_sha256(resolve(path, PATH_KEY))

    @classmethod
    def load(cls, path: str, device: torch.device | str, expected_sha256: str | None) -> ClipImageEmbedder:
        source = resolve(path, PATH_KEY)
        return cls(source, check_sha256(source, expected_sha256, SHA256_KEY), device)

    @staticmethod
    def identity(path: str) -> dict[str, Any]:
        """What defines the embeddings besides the frames, read without loading the weights (a rerun whose
        embeddings are all recorded loads none); no paths."""
        source = resolve(path, PATH_KEY)
        return {"encoder": NAME, "checkpoint_sha256": checkpoint_sha256(source), "route": source.kind,
                "embedding": "image_embeds" if has_projection(source) else "pooler_output",
                "preprocessing": _preprocess(source, image_size(source)).record(), "precision": "fp32"}

    @torch.inference_mode()
    def embed(self, frames: list[np.ndarray]) -> np.ndarray:
        """uint8 [H, W, 3] RGB frames, of any sizes -> float32 [N, D], each row of unit L2 norm; one forward pass."""
        for frame in frames:
            if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[-1] != 3:
                raise ValueError(f"CLIP embeddings are of uint8 [H, W, 3] RGB frames, got {frame.dtype} "
                                 f"{list(frame.shape)}")
        with tf32_off():
            pixels = torch.cat([self.preprocess(torch.from_numpy(np.stack(group)), self.device)
                                for group in _same_size_runs(frames)])
            out = self.model(pixel_values=pixels)
            vectors = out.image_embeds if self.projected else out.pooler_output
        rows = vectors.float().cpu().numpy().astype(np.float64)
        return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def _same_size_runs(frames: list[np.ndarray]) -> list[list[np.ndarray]]:
    """The frames in order, cut where the size changes: each run is preprocessed as one stack."""
    runs: list[list[np.ndarray]] = []
    for frame in frames:
        if runs and runs[-1][0].shape == frame.shape:
            runs[-1].append(frame)
        else:
            runs.append([frame])
    return runs
