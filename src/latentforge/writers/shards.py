"""HDF5 shards and empty_prompt.h5 of a cache (docs/cache-format.md): layout, names, byte-stable writing."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import h5py
import numpy as np

from ..errors import CacheIntegrityError
from ..io import atomic_path

SHARDS_DIR = "shards"
EMPTY_PROMPT_NAME = "empty_prompt.h5"
SOURCE_INDEX_DATASET = "source_index"
# A fixed file-format version: h5py's default ("earliest") may change and would change the bytes.
# v110 stores single-sample chunks in a fixed-array index, cheap for random reads.
HDF5_LIBVER = ("v110", "v110")
_SHARD_NAME = re.compile(r"^part-(\d{5})-of-(\d{5})-(\d{9})-(\d{9})\.h5$")


@dataclass(frozen=True)
class CacheLayout:
    """What every shard holds: dataset names, per-sample shapes and dtypes, rows per shard."""

    latent_dataset: str
    latent_shape: tuple[int, ...]  # [C_total, T', H', W']
    storage_dtype: str  # float16 | float32
    rows_per_shard: int
    text_prefix: str | None  # "t5" -> t5_text_embeddings / t5_text_length; None: no text datasets
    text_dim: int | None
    max_length: int

    @property
    def embeddings_dataset(self) -> str:
        return f"{self.text_prefix}_text_embeddings"

    @property
    def length_dataset(self) -> str:
        return f"{self.text_prefix}_text_length"

    def dataset_specs(self, rows: int) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        """{dataset name: (dtype, full shape)} of a shard with `rows` rows, in writing order."""
        specs = {self.latent_dataset: (np.dtype(self.storage_dtype), (rows, *self.latent_shape))}
        if self.text_prefix is not None:
            specs[self.embeddings_dataset] = (np.dtype(self.storage_dtype), (rows, self.max_length, self.text_dim))
            specs[self.length_dataset] = (np.dtype("uint16"), (rows,))
        specs[SOURCE_INDEX_DATASET] = (np.dtype("int64"), (rows,))
        return specs

    def empty_prompt_specs(self) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        return {k: v for k, v in self.dataset_specs(1).items() if k in (self.embeddings_dataset, self.length_dataset)}

    @classmethod
    def from_cache_config(cls, config: dict[str, Any]) -> "CacheLayout":
        """The layout a cache_config.json promises (KeyError/TypeError/ValueError when it is malformed)."""
        text = config["text"]
        prefix = None
        if text is not None:
            embeddings = text["embeddings_dataset"]
            if not embeddings.endswith("_text_embeddings") or text["length_dataset"] != (
                embeddings[: -len("_embeddings")] + "_length"
            ):
                raise ValueError(f"text datasets {embeddings!r}/{text['length_dataset']!r} do not share a prefix")
            prefix = embeddings[: -len("_text_embeddings")]
        return cls(
            latent_dataset=config["latent"]["dataset"],
            latent_shape=tuple(int(v) for v in config["latent"]["shape"]),
            storage_dtype=config["storage_dtype"],
            rows_per_shard=int(config["rows_per_shard"]),
            text_prefix=prefix,
            text_dim=None if text is None else int(text["dim"]),
            max_length=0 if text is None else int(text["max_length"]),
        )


def shard_ranges(num_samples: int, rows_per_shard: int) -> list[tuple[int, int]]:
    """[start, end) of each shard's dataset_index range; the last shard may be shorter."""
    count = math.ceil(num_samples / rows_per_shard)
    return [(k * rows_per_shard, min((k + 1) * rows_per_shard, num_samples)) for k in range(count)]


def shard_name(k: int, n: int, start: int, end: int) -> str:
    return f"part-{k:05d}-of-{n:05d}-{start:09d}-{end:09d}.h5"


def shard_paths(num_samples: int, rows_per_shard: int) -> list[tuple[str, int, int]]:
    """(relative path "shards/part-…h5", start, end) of every shard of a cache."""
    ranges = shard_ranges(num_samples, rows_per_shard)
    return [(f"{SHARDS_DIR}/{shard_name(k, len(ranges), s, e)}", s, e) for k, (s, e) in enumerate(ranges)]


def is_shard_name(name: str) -> bool:
    return _SHARD_NAME.match(name) is not None


def _create(handle: h5py.File, name: str, dtype: np.dtype, shape: tuple[int, ...]) -> h5py.Dataset:
    # Early allocation places every chunk at creation, in row order, so the bytes do not depend on the
    # order or grouping of later writes; every chunk is then written in full, so no fill pass is needed.
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
    dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
    return handle.create_dataset(
        name, shape=shape, dtype=dtype, chunks=(1, *shape[1:]), track_times=False, dcpl=dcpl
    )


# fill(datasets, start, stop) writes rows [start, stop) of every dataset; called over consecutive blocks.
BlockFiller = Callable[[dict[str, h5py.Dataset], int, int], None]


def write_h5_atomic(
    path: Path, specs: dict[str, tuple[np.dtype, tuple[int, ...]]], block_rows: int, fill: BlockFiller
) -> None:
    """Create `path` (tmp sibling + fsync + rename) with `specs` datasets, filled `block_rows` rows at a time."""
    rows = next(iter(specs.values()))[1][0]
    with atomic_path(path) as tmp:
        with h5py.File(tmp, "w", libver=HDF5_LIBVER) as handle:
            datasets = {name: _create(handle, name, dtype, shape) for name, (dtype, shape) in specs.items()}
            for start in range(0, rows, block_rows):
                fill(datasets, start, min(start + block_rows, rows))


def write_empty_prompt(path: Path, layout: CacheLayout, embeddings: np.ndarray, lengths: np.ndarray) -> None:
    """empty_prompt.h5: the empty prompt's text datasets, [1, max_length, D] (storage dtype) and [1] (any int)."""
    specs = layout.empty_prompt_specs()
    if lengths.shape != (1,) or not 0 <= int(lengths[0]) <= layout.max_length:
        raise CacheIntegrityError(f"empty prompt length {lengths.tolist()} is not one value in [0, {layout.max_length}]")
    arrays = {layout.embeddings_dataset: embeddings, layout.length_dataset: lengths.astype(np.uint16)}
    for name, (dtype, shape) in specs.items():
        if arrays[name].shape != shape or arrays[name].dtype != dtype:
            raise CacheIntegrityError(
                f"empty prompt {name}: got {arrays[name].dtype} {list(arrays[name].shape)}, "
                f"the layout needs {dtype} {list(shape)}; cast to the storage dtype and keep the batch axis"
            )

    def fill(datasets: dict[str, h5py.Dataset], start: int, stop: int) -> None:
        for name, dataset in datasets.items():
            dataset[start:stop] = arrays[name][start:stop]

    write_h5_atomic(path, specs, 1, fill)
