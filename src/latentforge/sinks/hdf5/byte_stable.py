"""Byte-stable HDF5 writing for shards and empty_prompt.h5: fixed file-format version, chunks placed at
creation, tmp sibling + fsync + rename (docs/cache-format.md)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

import h5py
import numpy as np

from ...cache.layout import DatasetSpecs, ShardSchema
from ...cache.text_rows import PADDED, TRIMMED, trim_rows, write_trimmed
from ...errors import CacheIntegrityError
from ...io import atomic_path

# A fixed file-format version: h5py's default ("earliest") may change and would change the bytes.
# v110 stores single-sample chunks in a fixed-array index, cheap for random reads.
HDF5_LIBVER = ("v110", "v110")


def _create(handle: h5py.File, name: str, dtype: np.dtype, shape: tuple[int, ...]) -> h5py.Dataset:
    # Early allocation places every chunk at creation, in row order, so the bytes do not depend on the
    # order or grouping of later writes; every chunk is then written in full, so no fill pass is needed.
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
    if h5py.check_vlen_dtype(dtype) is None:  # HDF5 needs a fill value (the empty array) for variable-length data
        dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
    return handle.create_dataset(
        name, shape=shape, dtype=dtype, chunks=(1, *shape[1:]), track_times=False, dcpl=dcpl
    )


# fill(datasets, start, stop) writes rows [start, stop) of every dataset; called over consecutive blocks.
BlockFiller = Callable[[dict[str, h5py.Dataset], int, int], None]


def write_h5_atomic(path: Path, specs: DatasetSpecs, block_rows: int, fill: BlockFiller) -> None:
    """Create `path` (tmp sibling + fsync + rename) with `specs` datasets, filled `block_rows` rows at a time."""
    rows = next(iter(specs.values()))[1][0]
    with atomic_path(path) as tmp:
        with h5py.File(tmp, "w", libver=HDF5_LIBVER) as handle:
            datasets = {name: _create(handle, name, dtype, shape) for name, (dtype, shape) in specs.items()}
            for start in range(0, rows, block_rows):
                fill(datasets, start, min(start + block_rows, rows))


def write_empty_prompt(path: Path, schema: ShardSchema, embeddings: np.ndarray, lengths: np.ndarray) -> None:
    """empty_prompt.h5: the empty prompt's text datasets from [1, max_length, D] (storage dtype) and [1] (any int),
    stored as the shards store text (schema.text_storage)."""
    specs = dataclasses.replace(schema, text_storage=PADDED).empty_prompt_specs()
    if lengths.shape != (1,) or not 0 <= int(lengths[0]) <= schema.max_length:
        raise CacheIntegrityError(f"empty prompt length {lengths.tolist()} is not one value in "
                                  f"[0, {schema.max_length}]")
    arrays = {schema.embeddings_dataset: embeddings, schema.length_dataset: lengths.astype(np.uint16)}
    for name, (dtype, shape) in specs.items():
        if arrays[name].shape != shape or arrays[name].dtype != dtype:
            raise CacheIntegrityError(
                f"empty prompt {name}: got {arrays[name].dtype} {list(arrays[name].shape)}, "
                f"the schema needs {dtype} {list(shape)}; cast to the storage dtype and keep the batch axis"
            )


    def fill(datasets: dict[str, h5py.Dataset], start: int, stop: int) -> None:
        for name, dataset in datasets.items():
            if name == schema.embeddings_dataset and schema.text_storage == TRIMMED:
                write_trimmed(dataset, start, trim_rows(embeddings[start:stop], lengths[start:stop]))
            else:
                dataset[start:stop] = arrays[name][start:stop]

    write_h5_atomic(path, schema.empty_prompt_specs(), 1, fill)
