"""Identical prompts are encoded once per build: a rank keeps every encoded row in front of its encoder.

Rows are kept trimmed to their length (positions past it are exactly 0, so nothing is lost): a T5 row of
a typical caption is ~0.5 MB instead of 2 MB padded, so the default budget holds thousands of prompts. Past
the budget the least recently used rows go first, and a prompt seen again after that is encoded again.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from .base import TextBatch, TextEncoder

DEFAULT_CAPACITY_BYTES = 256 << 20  # what a rank holds in a build whose captions never repeat


class PromptCache:
    """Wraps a TextEncoder; keeps encoded rows up to `capacity_bytes` (least recently used dropped first)."""

    def __init__(self, encoder: TextEncoder, capacity_bytes: int = DEFAULT_CAPACITY_BYTES):
        self.encoder = encoder
        self.capacity_bytes = capacity_bytes
        self._rows: OrderedDict[str, tuple[np.ndarray, bool]] = OrderedDict()  # trimmed float32 row, truncated
        self._bytes = 0
        self.encoded_prompts = 0  # how many prompts actually went through the encoder

    def encode(self, prompts: list[str]) -> TextBatch:
        missing = list(dict.fromkeys(p for p in prompts if p not in self._rows))
        fresh: dict[str, tuple[np.ndarray, bool]] = {}
        if missing:
            batch = self.encoder.encode(missing)
            self.encoded_prompts += len(missing)
            for i, prompt in enumerate(missing):
                # A copy, never a view: a view of a float32 batch kept the whole padded batch alive, uncounted
                # by the budget (1.6 MB per unit of a tiny build, without bound)
                row = np.array(batch.embeddings[i, : int(batch.lengths[i])], dtype=np.float32, copy=True)
                fresh[prompt] = (row, bool(batch.truncated[i]))
        rows = [fresh[p] if p in fresh else self._rows[p] for p in prompts]
        self._remember(prompts, fresh)
        max_length = self.encoder.max_length
        embeddings = np.zeros((len(prompts), max_length, self.encoder.embed_dim), dtype=np.float32)
        for i, (row, _) in enumerate(rows):
            embeddings[i, : len(row)] = row
        return TextBatch(
            embeddings=embeddings,
            lengths=np.array([len(r[0]) for r in rows], dtype=np.int64),
            truncated=np.array([r[1] for r in rows], dtype=bool),
        )

    def _remember(self, prompts: list[str], fresh: dict[str, tuple[np.ndarray, bool]]) -> None:
        for prompt, entry in fresh.items():
            self._rows[prompt] = entry
            self._bytes += entry[0].nbytes
        for prompt in prompts:
            self._rows.move_to_end(prompt)
        while self._bytes > self.capacity_bytes and self._rows:
            _, (row, _) = self._rows.popitem(last=False)
            self._bytes -= row.nbytes
