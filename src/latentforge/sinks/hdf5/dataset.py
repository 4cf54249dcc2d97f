"""LatentCacheDataset: a map-style dataset over a latentforge cache; no video decode, no VAE, no T5 per step."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import h5py
import numpy as np
import torch
from torch.utils.data import Dataset

from ...cache.audio_section import AUDIO_PRESENT, AUDIO_SPAN, audio_present
from ...cache.config_file import CacheConfig
from ...cache.expect import CacheExpectation, CacheMismatch, check_expectation
from ...cache.hdf5_files import reading
from ...cache.layout import EMPTY_PROMPT, SOURCE_INDEX_DATASET
from ...cache.text_rows import TRIMMED, padded_row, trimmed_dtype
from ...cache.token_ids import check_flatten_tokens, raster_sequence
from ...cache.whole_read import published_folder, read_whole
from ...errors import CacheIntegrityError, ConfigError
from .manifest_index import ManifestIndex, read_manifest_index
from .query import query_indices
from .roots import load_for_training, resolve_cache_root
from .row_reader import MAX_OPEN_SHARDS, ShardReader


class LatentCacheDataset(Dataset):
    """Items are dicts of tensors read from one cache row.

    - `latent` [C, T', H', W'] (storage dtype): the selected modalities concatenated on channels, in the
      order given; `channel_ranges[name]` is each one's [start, end) inside it. Every modality is a target.
    - `conditioning_latent` [C_m, f1 - f0, H', W']: latent frames [f0, f1) of the modality whose role is
      "conditioning+target" (RGB frame 0 in the perception preset), read even when that modality is not
      selected.
    - `text_embeddings` [L, D] (storage dtype, zero past the length), `text_length` int64, `text_mask` bool [L]
      (absent when the cache has no text).
    - provenance: `dataset_index`, `source_index` (ints), `sample_id`, `prompt` (str).

    A discrete-token cache (docs/cache-format.md) gives its ids as int64: `latent` [M, T', H', W'] (and
    `conditioning_latent`) hold token ids, one stream per modality; with `flatten_tokens=True` items also hold
    `tokens` [M, T'*H'*W'] (each stream in (t, h, w) raster order) and `token_length` (T'*H'*W', int64).

    HDF5 files open lazily in the process that reads, so the dataset is safe to hand to DataLoader workers
    under fork and spawn. `expect=` is checked here, before the first item.

    `where=` keeps only the rows whose manifest satisfies an SQL condition (`latentforge.query_indices`); item i
    is then the i-th of those rows, and its `dataset_index` is still the row's place in the whole cache.

    `generation=` reads the cache from that folder instead: a whole copy of it that a swap is moving into `root`
    (a bucket in its bucketed root's build/swap, which BucketedLatentDataset reads); a shard is read from `root`
    once that folder is gone.
    """

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        modalities: Sequence[str] | None = None,
        expect: CacheExpectation | dict[str, Any] | None = None,
        *,
        text: bool = True,
        require_complete: bool = True,
        where: str | None = None,
        flatten_tokens: bool = False,
        max_open_shards: int = MAX_OPEN_SHARDS,
        generation: str | os.PathLike[str] | None = None,
    ):
        self.max_open_shards = max_open_shards
        if generation is None:
            self.root: Path = resolve_cache_root(root)
            # the config, the index and the rows of one whole cache, even while a build swaps in a new one
            self._folder, self.config, self.index, self.rows = read_whole(
                self.root, lambda folder: _records(folder, require_complete, where))
        else:  # whoever read the folder made sure it held one whole cache
            self.root = Path(root)
            self._folder, self.config, self.index, self.rows = _records(resolve_cache_root(generation),
                                                                        require_complete, where)
        check_flatten_tokens(self.root, self.config, flatten_tokens)
        self.flatten_tokens = flatten_tokens
        expectation = CacheExpectation.coerce(expect)
        available = self.config.modality_names
        if modalities is None and expectation.modalities is not None:
            if not set(expectation.modalities) <= set(available):
                raise CacheMismatch(str(self.root), [("modalities", expectation.modalities, available)])
            modalities = expectation.modalities
        self.modalities: tuple[str, ...] = tuple(modalities) if modalities is not None else available
        if not self.modalities or len(set(self.modalities)) != len(self.modalities):
            raise ConfigError(
                f"modalities={list(self.modalities)}: give distinct names from the cache's {list(available)}"
            )
        ranges = [self.config.modality(name).channels for name in self.modalities]
        check_expectation(self.root, self.config, self.modalities, expectation)
        self.expectation = CacheExpectation.of_cache(self.config, self.modalities)
        self.channel_ranges: dict[str, tuple[int, int]] = {}
        cursor = 0
        for name, (start, end) in zip(self.modalities, ranges):
            self.channel_ranges[name] = (cursor, cursor + end - start)
            cursor += end - start
        self._reads = _merged_reads(ranges)
        self.latent_shape = (cursor, *self.config.latent.shape[1:])
        self.text = text and self.config.text is not None
        self.streams = self.config.streams  # conditioning and side streams, each under its name
        self._shards: ShardReader | None = None
        self._pid: int | None = None
        self._empty_prompt: dict[str, torch.Tensor] | None = None

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        """Read a batch into one tensor per field; collate_latent_batch returns those tensors without a copy.

        Rows go straight into memory the main process can map (see row_reader), so a DataLoader worker does not
        copy a batch into shared memory after reading it.
        """
        indices = [self._dataset_index(int(item)) for item in indices]
        reader = self._reader()
        locations = [self._locate(index) for index in indices]
        latent = reader.gather(locations, self.config.latent.dataset, self.latent_shape, self._reads)
        if self.config.tokens is not None:
            latent = latent.long()  # uint16 ids: int64, what embeddings and losses take
        fields = {"latent": latent}
        if self.flatten_tokens:
            fields["tokens"] = raster_sequence(latent)
        if self.config.latent.conditioning_modality is not None:
            fields["conditioning_latent"] = self._conditioning(reader, locations, latent)
        for stream in self.streams:  # conditioning and side streams (docs/conditioning.md, docs/modalities.md)
            fields[stream.name] = reader.gather(locations, stream.name, stream.shape, [(0, stream.shape[0], 0)])
        text = self.config.text
        if self.text:
            shape = (text.max_length, text.dim)
            if text.storage == TRIMMED:
                fields["text_embeddings"] = reader.gather_trimmed(locations, text.embeddings_dataset,
                                                                  text.length_dataset, shape, self.config.storage_dtype)
            else:
                fields["text_embeddings"] = reader.gather(locations, text.embeddings_dataset, shape,
                                                          [(0, shape[0], 0)])
        items = []
        for slot, (index, (shard, row)) in enumerate(zip(indices, locations)):
            item: dict[str, Any] = {key: value[slot] for key, value in fields.items()}
            if self.text:
                length = int(reader.file(shard)[text.length_dataset][row])
                item.update(_text_fields(fields["text_embeddings"][slot], length))
            if self.flatten_tokens:
                item["token_length"] = torch.tensor(item["tokens"].shape[-1], dtype=torch.int64)
            if self.config.audio is not None:
                item[AUDIO_PRESENT] = audio_present(item[AUDIO_SPAN])
            item["dataset_index"] = index
            item["source_index"] = int(self.index.source_index[index])
            item["sample_id"] = self.index.sample_id[index]
            item["prompt"] = self.index.prompt[index]
            items.append(item)
        return items

    def _dataset_index(self, item: int) -> int:
        if not 0 <= item < len(self.rows):
            raise IndexError(f"item {item} is out of range for a dataset of {len(self.rows)} samples")
        return int(self.rows[item])

    def _locate(self, index: int) -> tuple[int, int]:
        """(shard, row) of a dataset_index, after checking the row is the sample the manifest names."""
        shard, row = int(self.index.shard_of[index]), int(self.index.cache_row[index])
        stored = int(self._reader().file(shard)[SOURCE_INDEX_DATASET][row])
        if stored != self.index.source_index[index]:
            raise CacheIntegrityError(
                f"{self.root}: dataset_index {index} ({self.index.sample_id[index]!r}) maps to "
                f"{self.index.shard_paths[shard]} row {row}, whose source_index is {stored}, "
                f"but the manifest says {self.index.source_index[index]}; run `latentforge verify` on the cache"
            )
        return shard, row

    def _conditioning(self, reader: ShardReader, locations: list[tuple[int, int]], latent: torch.Tensor
                      ) -> torch.Tensor:
        """Latent frames of the conditioning modality: from the rows just read, or from the file if not selected."""
        name = self.config.latent.conditioning_modality
        first, last = self.config.latent.conditioning_frames
        if name in self.channel_ranges:
            start, end = self.channel_ranges[name]
            return torch.from_numpy(np.ascontiguousarray(latent.numpy()[:, start:end, first:last]))
        start, end = self.config.modality(name).channels
        shape = (len(locations), end - start, last - first, *self.latent_shape[2:])
        out = np.empty(shape, dtype=self.config.latent_dtype)
        for slot, (shard, row) in enumerate(locations):
            with reading(self.root / self.index.shard_paths[shard]):
                latents = reader.file(shard)[self.config.latent.dataset]
                latents.read_direct(out, np.s_[row, start:end, first:last], np.s_[slot])
        return torch.from_numpy(out.astype(np.int64) if self.config.tokens is not None else out)

    def empty_prompt(self) -> dict[str, torch.Tensor]:
        """The empty prompt's `text_embeddings`, `text_length`, `text_mask`, for caption dropout."""
        if self._empty_prompt is None:
            # the prompt of the cache the rows come from, while the folder they were read from is there
            folder = self._folder if (self._folder / EMPTY_PROMPT).is_file() else published_folder(self.root)
            path = folder / EMPTY_PROMPT
            text = self.config.text
            if text is None or not path.is_file():
                raise ConfigError(
                    f"{self.root} has no {EMPTY_PROMPT}; rebuild the cache with text.empty_prompt=true to "
                    "use caption dropout"
                )
            with reading(path), h5py.File(path, "r") as handle:
                embeddings, length = padded_row(handle, text.embeddings_dataset, text.length_dataset, 0,
                                                text.max_length, text.dim)
            self._empty_prompt = _text_fields(torch.from_numpy(embeddings), length)
        return self._empty_prompt

    def _reader(self) -> ShardReader:
        # A forked worker inherits the parent's open HDF5 handles; HDF5 state is not fork-safe, so reopen.
        if self._shards is None or self._pid != os.getpid():
            # a cache read from a swap's folder finds its shards in the root once the swap is done
            later = self.root if self._folder != self.root else None
            self._shards = ShardReader(self._folder, self.index.shard_paths, self._check_shard, self.max_open_shards,
                                       later)
            self._pid = os.getpid()
        return self._shards

    def _check_shard(self, handle: h5py.File, path: Path) -> None:
        expected = {self.config.latent.dataset: (self.config.latent_dtype, self.config.latent.shape)}
        text = self.config.text
        if self.text and text.storage == TRIMMED:
            expected[text.embeddings_dataset] = (trimmed_dtype(self.config.storage_dtype), ())
        elif self.text:
            expected[text.embeddings_dataset] = (self.config.storage_dtype, (text.max_length, text.dim))
            expected[text.length_dataset] = ("uint16", ())
        expected.update({stream.name: (stream.dtype, stream.shape) for stream in self.streams})
        expected[SOURCE_INDEX_DATASET] = ("int64", ())
        for name, (dtype, shape) in expected.items():
            if name not in handle:
                raise CacheIntegrityError(f"{path} has no dataset {name!r}; cache_config.json promises it")
            dataset = handle[name]
            if (dataset.dtype != np.dtype(dtype) or tuple(dataset.shape[1:]) != tuple(shape)
                    or h5py.check_vlen_dtype(dataset.dtype) != h5py.check_vlen_dtype(np.dtype(dtype))):
                raise CacheIntegrityError(
                    f"{path}:{name} is {dataset.dtype} {list(dataset.shape)}; cache_config.json promises "
                    f"{dtype} [N, {', '.join(map(str, shape))}]"
                )

    def close(self) -> None:
        if self._shards is not None and self._pid == os.getpid():
            self._shards.close()
        self._shards = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_shards"] = None
        state["_pid"] = None
        return state


def _records(folder: Path, require_complete: bool, where: str | None
             ) -> tuple[Path, CacheConfig, ManifestIndex, np.ndarray]:
    """What a Dataset reads of a cache before its first item: config, index and the rows `where` keeps."""
    config = load_for_training(folder, require_complete)
    index = read_manifest_index(folder, config.num_samples)
    rows = np.asarray(query_indices(folder, where) if where is not None else range(len(index)), dtype=np.int64)
    return folder, config, index, rows


def _text_fields(embeddings: torch.Tensor, length: int) -> dict[str, torch.Tensor]:
    return {
        "text_embeddings": embeddings,
        "text_length": torch.tensor(length, dtype=torch.int64),
        "text_mask": torch.from_numpy(np.arange(embeddings.shape[0]) < length),
    }


def _merged_reads(ranges: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """(stored start, stored end, start in the output) per read; adjacent channel ranges become one read."""
    reads: list[tuple[int, int, int]] = []
    at = 0
    for start, end in ranges:
        if reads and reads[-1][1] == start:
            first, _, first_at = reads[-1]
            reads[-1] = (first, end, first_at)
        else:
            reads.append((start, end, at))
        at += end - start
    return reads
