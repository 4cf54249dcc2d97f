"""Identical prompts are encoded once per build: a bounded cache in front of a text encoder."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from .base import TextBatch, TextEncoder


class PromptCache:
    """Wraps a TextEncoder; keeps up to `capacity` encoded prompts (least recently used dropped first)."""

    def __init__(self, encoder: TextEncoder, capacity: int = 256):
        self.encoder = encoder
        self.capacity = capacity
        self._rows: OrderedDict[str, tuple[np.ndarray, int, bool]] = OrderedDict()
        self.encoded_prompts = 0  # how many prompts actually went through the encoder

    def encode(self, prompts: list[str]) -> TextBatch:
        missing = list(dict.fromkeys(p for p in prompts if p not in self._rows))
        if missing:
            batch = self.encoder.encode(missing)
            self.encoded_prompts += len(missing)
            for i, prompt in enumerate(missing):
                self._rows[prompt] = (batch.embeddings[i], int(batch.lengths[i]), bool(batch.truncated[i]))
        rows = [self._rows[p] for p in prompts]
        for prompt in prompts:
            self._rows.move_to_end(prompt)
        while len(self._rows) > max(self.capacity, len(set(prompts))):
            self._rows.popitem(last=False)
        return TextBatch(
            embeddings=np.stack([r[0] for r in rows]),
            lengths=np.array([r[1] for r in rows], dtype=np.int64),
            truncated=np.array([r[2] for r in rows], dtype=bool),
        )
