"""A staged unit's text kept trimmed: each row's embedding tokens up to its length, one after another
(`text_tokens`, [sum of lengths, D]), beside the lengths and the padded length L. A umT5 row padded to 512 tokens
is 4 MB of float16, nearly all zeros, against the few hundred kilobytes of its tokens, and every hash of a staged
unit reads it. Read back, the rows are the padded [n, L, D] arrays a commit slices, zero past each length.

A unit whose padding is not all zero (rows handed over as they are, such as pickled embeddings) keeps the padded
array (`text_embeddings`), so what is committed is the same bytes either way.
"""

from __future__ import annotations

from typing import Any

import h5py
import numpy as np

PADDED = "text_embeddings"
TOKENS = "text_tokens"
LENGTHS = "text_lengths"
MAX_LENGTH_ATTR = "text_max_length"


def write_staged_text(handle: h5py.File, embeddings: np.ndarray, lengths: np.ndarray,
                      max_length: int | None = None) -> None:
    """[n, L, D] embeddings and [n] lengths into a staged unit's file: trimmed unless the padding holds values.
    `max_length`: the L the rows are read back as, when `embeddings` are padded only to their longest row (zeros
    past it); None: L itself."""
    max_length = embeddings.shape[1] if max_length is None else max_length
    positions = np.arange(embeddings.shape[1])
    padding = positions[None, :] >= np.asarray(lengths)[:, None]
    if np.any(embeddings[padding]):
        if embeddings.shape[1] < max_length:  # the padded array as it is read back
            embeddings = np.pad(embeddings, ((0, 0), (0, max_length - embeddings.shape[1]), (0, 0)))
        handle.create_dataset(PADDED, data=embeddings, track_times=False)
    else:
        tokens = embeddings[~padding]  # row by row, each row's first `length` tokens
        handle.create_dataset(TOKENS, data=tokens.reshape(-1, embeddings.shape[2]), track_times=False)
        handle.attrs[MAX_LENGTH_ATTR] = max_length
    handle.create_dataset(LENGTHS, data=lengths, track_times=False)


def open_staged_text(handle: h5py.File) -> tuple[Any, Any]:
    """(embeddings as padded rows, lengths) of a staged unit's file; (None, None) when it holds no text."""
    if LENGTHS not in handle:
        return None, None
    lengths = handle[LENGTHS]
    if TOKENS not in handle:
        return handle[PADDED], lengths
    return PaddedRows(handle[TOKENS], lengths[()], int(handle.attrs[MAX_LENGTH_ATTR])), lengths


class PaddedRows:
    """Trimmed tokens sliced as the padded [n, L, D] array they came from."""

    def __init__(self, tokens: h5py.Dataset, lengths: np.ndarray, max_length: int):
        self._tokens, self._lengths = tokens, np.asarray(lengths, dtype=np.int64)
        self._starts = np.concatenate([[0], np.cumsum(self._lengths)])
        self.dtype = tokens.dtype
        self.shape = (len(self._lengths), max_length, tokens.shape[1])

    def _row(self, i: int) -> np.ndarray:
        row = np.zeros(self.shape[1:], self.dtype)
        row[: self._lengths[i]] = self._tokens[self._starts[i]:self._starts[i + 1]]
        return row

    def __getitem__(self, index: Any) -> np.ndarray:
        if isinstance(index, (int, np.integer)):
            return self._row(range(self.shape[0])[index])
        picked = range(self.shape[0])[slice(None) if index == () else index]
        return np.stack([self._row(i) for i in picked]) if len(picked) else np.empty((0, *self.shape[1:]), self.dtype)
