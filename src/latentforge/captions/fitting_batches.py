"""Caption batches that fit in the device's memory: a generate call that runs out of GPU memory is asked again in
halves, the smaller batch is kept for the calls that follow, and the build says so once (captions.batch_size was
too large for this GPU, model and frame size). A single window that does not fit stops the pass with what to lower.

Greedy answers do not depend on the batch in exact arithmetic; in bf16 on a GPU, kernels chosen for another batch
shape may round differently, so a caption made after the batch was lowered can differ in a late token from the
one a larger batch would have made. Each caption is recorded once and never made again."""

from __future__ import annotations

import warnings

import numpy as np
import torch

from ..errors import InputNotice, LatentforgeError
from .base import Captioner, Generation


class FittingBatches:
    """`captioner.generate` over batches of at most `limit` windows, `limit` halved at each out-of-memory error."""

    def __init__(self, captioner: Captioner, batch_size: int):
        self.captioner = captioner
        self.limit = batch_size

    def generate(self, windows: list[np.ndarray], prompt: str, max_new_tokens: int) -> list[Generation]:
        out: list[Generation] = []
        start = 0
        while start < len(windows):
            chunk = windows[start:start + self.limit]
            try:
                out += self.captioner.generate(chunk, prompt, max_new_tokens)
            except torch.cuda.OutOfMemoryError:
                if len(chunk) == 1:
                    frames = chunk[0].shape
                    raise LatentforgeError(
                        f"the captioner ran out of GPU memory on a single window ({frames[0]} frames of "
                        f"{frames[2]}x{frames[1]}); lower captions.frames or captions.resolution, or free the GPU "
                        "of other work") from None
                self.limit = len(chunk) // 2
                torch.cuda.empty_cache()
                warnings.warn(f"the captioner ran out of GPU memory on {len(chunk)} windows at once; captioning "
                              f"{self.limit} at a time from here (set captions.batch_size={self.limit} to start there)",
                              InputNotice, stacklevel=2)
                continue
            start += len(chunk)
        return out
