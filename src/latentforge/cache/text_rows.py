"""How a text row is stored in a shard and restored for readers (docs/cache-format.md).

`padded` (the default) stores every row as [max_length, D], zero past its length. `trimmed` stores only the
valid tokens: the embeddings dataset is an HDF5 variable-length array of the storage dtype, one element per
row holding its first `length` tokens flattened ([length * D] values). Every reader goes through
`padded_row`, so both layouts give the same zero-padded [max_length, D] array, bit for bit.
"""

from __future__ import annotations

import h5py
import numpy as np

from ..config.schema import TEXT_STORAGES
from ..errors import CacheIntegrityError

PADDED, TRIMMED = TEXT_STORAGES


def trimmed_dtype(storage_dtype: str | np.dtype) -> np.dtype:
    """The variable-length dtype of a trimmed embeddings dataset."""
    return h5py.vlen_dtype(np.dtype(storage_dtype))


def is_trimmed(dataset: h5py.Dataset) -> bool:
    return h5py.check_vlen_dtype(dataset.dtype) is not None


def trim_rows(embeddings: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """[n, max_length, D] padded rows -> n flattened arrays of their first `length` tokens (an object array)."""
    rows = np.empty(len(embeddings), dtype=object)
    for i, (row, length) in enumerate(zip(embeddings, lengths)):
        rows[i] = np.ascontiguousarray(row[: int(length)]).reshape(-1)
    return rows


def write_trimmed(dataset: h5py.Dataset, start: int, rows: np.ndarray) -> None:
    """Store trim_rows' output at rows [start, start + len(rows)), one element at a time: h5py would stack a
    slice of equally long rows into a 2-D array, which a variable-length dataset refuses."""
    for offset, row in enumerate(rows):
        dataset[start + offset] = row


def restore_row(stored: np.ndarray, length: int, max_length: int, dim: int, where: str) -> np.ndarray:
    """A trimmed row's flattened tokens -> the zero-padded [max_length, D] row."""
    if stored.size != length * dim or length > max_length:
        raise CacheIntegrityError(
            f"{where}: the trimmed text row holds {stored.size} values, but its length {length} x dim {dim} "
            f"(at most {max_length} tokens) needs {length * dim}; run `latentforge verify` on the cache"
        )
    padded = np.zeros((max_length, dim), dtype=stored.dtype)
    padded[:length] = stored.reshape(length, dim)
    return padded


def padded_row(handle: h5py.File, embeddings: str, lengths: str, row: int, max_length: int, dim: int
               ) -> tuple[np.ndarray, int]:
    """(zero-padded [max_length, D] embeddings, length) of one row, whichever layout the file holds."""
    length = int(handle[lengths][row])
    dataset = handle[embeddings]
    if not is_trimmed(dataset):
        return dataset[row], length
    return restore_row(dataset[row], length, max_length, dim, f"{handle.filename}:{embeddings}[{row}]"), length
