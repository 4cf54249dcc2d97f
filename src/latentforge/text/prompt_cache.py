"""Identical prompts are encoded once per build: a rank keeps the rows of repeated prompts in front of its encoder.

Which rows: given `repeats` (text/prompt_repeats.py, the prompts the build encodes in more than one unit), only
those prompts' rows; a prompt that occurs in one unit is encoded and handed back, not kept, so a build whose
captions never repeat keeps nothing. Without it (scan's timing, a caller that knows no plan) every row is kept.
Rows are kept trimmed to their length (positions past it are exactly 0, so nothing is lost): a T5 row of
a typical caption is ~0.5 MB instead of 2 MB padded, so the default budget holds thousands of prompts. Past
the budget the least recently used rows go first, and a prompt seen again after that is encoded again.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from .base import TextBatch, TextEncoder
from .prompt_repeats import PromptRepeats

DEFAULT_CAPACITY_BYTES = 256 << 20  # the most a rank holds, however many prompts repeat


class PromptCache:
    """Wraps a TextEncoder; keeps the rows of `repeats` (all rows when None) up to `capacity_bytes`, the least
    recently used dropped first."""

    def __init__(self, encoder: TextEncoder, capacity_bytes: int = DEFAULT_CAPACITY_BYTES,
                 repeats: PromptRepeats | None = None):
        self.encoder = encoder
        self.capacity_bytes = capacity_bytes
        self.repeats = repeats
        self._rows: OrderedDict[str, tuple[np.ndarray, bool]] = OrderedDict()  # trimmed float32 row, truncated
        self.kept_bytes = 0  # the kept rows' bytes, counted against capacity_bytes
        self.encoded_prompts = 0  # how many prompts actually went through the encoder

    @property
    def kept_rows(self) -> int:
        """How many prompts' rows are kept now."""
        return len(self._rows)

    def stats(self) -> dict[str, int]:
        """For the rank's stats: prompts through the encoder, rows and bytes kept now, and the repeated prompts
        it was told of (-1: none told, every row kept)."""
        return {"encoded_prompts": self.encoded_prompts, "kept_rows": self.kept_rows, "kept_bytes": self.kept_bytes,
                "repeated_prompts": -1 if self.repeats is None else len(self.repeats)}

    def encode(self, prompts: list[str]) -> TextBatch:
        """The prompts' rows as the encoder gives them, [N, L, D] with L the longest row's length, not max_length."""
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
        # padded only to the longest row asked for: past it every row is zeros, which the staged unit leaves out
        width = max((len(row) for row, _ in rows), default=0)
        embeddings = np.zeros((len(prompts), width, self.encoder.embed_dim), dtype=np.float32)
        for i, (row, _) in enumerate(rows):
            embeddings[i, : len(row)] = row
        return TextBatch(
            embeddings=embeddings,
            lengths=np.array([len(r[0]) for r in rows], dtype=np.int64),
            truncated=np.array([r[1] for r in rows], dtype=bool),
        )

    def _remember(self, prompts: list[str], fresh: dict[str, tuple[np.ndarray, bool]]) -> None:
        for prompt, entry in fresh.items():
            if self.repeats is None or prompt in self.repeats:
                self._rows[prompt] = entry
                self.kept_bytes += entry[0].nbytes
        for prompt in prompts:
            if prompt in self._rows:
                self._rows.move_to_end(prompt)
        while self.kept_bytes > self.capacity_bytes and self._rows:
            _, (row, _) = self._rows.popitem(last=False)
            self.kept_bytes -= row.nbytes
