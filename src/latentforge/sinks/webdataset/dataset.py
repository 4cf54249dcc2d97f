"""StreamingLatentDataset: a training IterableDataset over a WebDataset cache, local or in object storage.

Each epoch the shard list is shuffled with (seed, epoch) and dealt round-robin to the streams, one stream per
(rank, DataLoader worker), unless `shuffle_buffer` is 0 or 1 (then shards and samples keep dataset_index
order): stream g = rank * workers + worker reads shards g, g + G, ... (G streams in all)
through a shuffle buffer seeded with (seed, epoch, g). A stream's order is thus a function of the cache, the
seed, the epoch and G alone. Every item says which `stream` it came from and its `stream_index` there; a trainer
that records, per stream, how many items it has consumed resumes mid-epoch at exactly the next item of every
stream (`load_state_dict`); skipped items are read through but never decoded.
"""

from __future__ import annotations

import json
import os
import random
import tarfile
from collections import deque
from typing import Any, BinaryIO, Iterator, Sequence

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from ...cache.audio_section import AUDIO_PRESENT, AUDIO_SPAN, audio_present
from ...cache.config_file import CacheConfig
from ...cache.expect import CacheExpectation, check_expectation
from ...cache.layout import CACHE_CONFIG, COMPLETE_MARKER, SUMS
from ...cache.root import sink_in
from ...cache.token_ids import check_flatten_tokens, raster_sequence
from ...errors import CacheIntegrityError, ConfigError
from ...storage import Storage
from .layout import EMPTY_PROMPT_TAR, LATENT, LENGTH, ROW, SINK, TEXT, npy_array, stream_member
from .local_swap import read_whole_root


class StreamingLatentDataset(IterableDataset):
    """Items as LatentCacheDataset's (`latent`, `text_embeddings` zero-padded [max_length, D], `text_length`,
    `text_mask`, `dataset_index`, `source_index`, `sample_id`, `prompt`) plus `stream` and `stream_index`; a
    discrete-token cache's ids as int64, and with `flatten_tokens=True` `tokens` and `token_length` too."""

    def __init__(self, url: str, storage_options: dict[str, Any] | None = None,
                 modalities: Sequence[str] | None = None,
                 expect: CacheExpectation | dict[str, Any] | None = None, *, rank: int = 0, world_size: int = 1,
                 seed: int = 0, shuffle_buffer: int = 0, text: bool = True, flatten_tokens: bool = False):
        if not 0 <= rank < world_size:
            raise ConfigError(f"rank={rank} with world_size={world_size}; give 0 <= rank < world_size")
        if shuffle_buffer < 0:
            raise ConfigError(f"shuffle_buffer={shuffle_buffer}; use 0 (no shuffling) or more")
        self.url, self.storage_options = url, dict(storage_options or {})
        # the records of one whole cache, even while a commit swaps a new one into a local root; its shards are read
        # where the records were, and at the root once a swap's folder is retired
        self._location, data, listed = read_whole_root(url, lambda location: _records(location, url,
                                                                                      self.storage_options))
        self.store = Storage(self._location, self.storage_options)
        self._pid = os.getpid()
        self.config = CacheConfig.from_json(data)
        check_flatten_tokens(url, self.config, flatten_tokens)
        self.flatten_tokens = flatten_tokens
        available = self.config.modality_names
        self.modalities = tuple(modalities) if modalities is not None else available
        if not self.modalities or len(set(self.modalities)) != len(self.modalities):
            raise ConfigError(f"modalities={list(self.modalities)}: give distinct names from the cache's "
                              f"{list(available)}")
        self._channels = [self.config.modality(name).channels for name in self.modalities]
        check_expectation(url, self.config, self.modalities, CacheExpectation.coerce(expect))
        self.text = text and self.config.text is not None
        self.streams = self.config.streams  # conditioning and side streams, each under its name
        self.shards = sorted(line.split("  ", 1)[1] for line in listed if line.endswith(".tar")
                             and line.split("  ", 1)[1].startswith("shards/"))
        self.rank, self.world_size, self.seed, self.shuffle_buffer = rank, world_size, seed, shuffle_buffer
        self.epoch = 0
        self._consumed: dict[int, int] = {}

    def set_epoch(self, epoch: int) -> None:
        """A new epoch starts every stream from its beginning."""
        self.epoch, self._consumed = epoch, {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """{"epoch": e, "consumed": {stream: items consumed}}: the next iteration resumes each stream after those."""
        self.epoch = int(state["epoch"])
        self._consumed = {int(stream): int(count) for stream, count in state["consumed"].items()}

    def _store(self) -> Storage:
        # A DataLoader worker forked from the process that opened the store gets its own (fsspec's async stores
        # are not fork-safe).
        if self._pid != os.getpid():
            self.store, self._pid = Storage(self._location, self.storage_options), os.getpid()
        return self.store

    def _open(self, rel: str) -> BinaryIO:
        try:
            return self._store().open(rel)
        except FileNotFoundError:
            if self._location == self.url:
                raise
            self._location, self._pid = self.url, -1  # the swap's folder was retired: its files are the root's now
            return self._store().open(rel)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = get_worker_info()
        workers, worker = (1, 0) if info is None else (info.num_workers, info.id)
        stream, streams = self.rank * workers + worker, self.world_size * workers
        order = list(self.shards)
        if self.shuffle_buffer > 1:  # without a buffer, one stream reads the cache in dataset_index order
            random.Random(f"{self.seed}:{self.epoch}").shuffle(order)
        skip = self._consumed.get(stream, 0)
        for index, raw in enumerate(self._shuffled(self._samples(order[stream::streams]), stream)):
            if index >= skip:
                yield {**self._decode(raw), "stream": stream, "stream_index": index}

    def empty_prompt(self) -> dict[str, torch.Tensor]:
        """The empty prompt's `text_embeddings`, `text_length`, `text_mask`, for caption dropout."""
        if self.config.text is None or not self.config.text.empty_prompt:
            raise ConfigError(f"{self.url} has no {EMPTY_PROMPT_TAR}; commit the cache with an empty prompt to use "
                              "caption dropout")
        raw = next(self._samples([EMPTY_PROMPT_TAR]))
        return self._text_fields(raw)

    def _samples(self, shards: list[str]) -> Iterator[dict[str, bytes]]:
        for rel in shards:
            with self._open(rel) as handle, tarfile.open(fileobj=handle, mode="r|") as tar:
                key, members = None, {}
                for member in tar:
                    name_key, _, suffix = member.name.partition(".")
                    if key is not None and name_key != key:
                        yield members
                        members = {}
                    key = name_key
                    extracted = tar.extractfile(member)
                    members[suffix] = extracted.read() if extracted is not None else b""
                if members:
                    yield members

    def _shuffled(self, samples: Iterator[dict[str, bytes]], stream: int) -> Iterator[dict[str, bytes]]:
        if self.shuffle_buffer <= 1:
            yield from samples
            return
        rng = random.Random(f"{self.seed}:{self.epoch}:{stream}")
        buffer: deque[dict[str, bytes]] = deque()
        for sample in samples:
            buffer.append(sample)
            if len(buffer) >= self.shuffle_buffer:
                buffer.rotate(-rng.randrange(len(buffer)))
                yield buffer.popleft()
        while buffer:
            buffer.rotate(-rng.randrange(len(buffer)))
            yield buffer.popleft()

    def _decode(self, raw: dict[str, bytes]) -> dict[str, Any]:
        row = json.loads(raw[ROW])
        latent = npy_array(raw[LATENT])
        parts = [latent[start:end] for start, end in self._channels]
        selected = np.concatenate(parts)
        if self.config.tokens is not None:
            selected = selected.astype(np.int64)  # uint16 ids: int64, what embeddings and losses take
        item: dict[str, Any] = {"latent": torch.from_numpy(np.ascontiguousarray(selected))}
        if self.flatten_tokens:
            item["tokens"] = raster_sequence(item["latent"])
            item["token_length"] = torch.tensor(item["tokens"].shape[-1], dtype=torch.int64)
        for stream in self.streams:  # conditioning streams (docs/conditioning.md), under their own names
            item[stream.name] = torch.from_numpy(npy_array(raw[stream_member(stream.name)]))
        if self.config.audio is not None:
            item[AUDIO_PRESENT] = audio_present(item[AUDIO_SPAN])
        if self.text:
            item.update(self._text_fields(raw))
        item.update({"dataset_index": int(row["dataset_index"]), "source_index": int(row["source_index"]),
                     "sample_id": row["sample_id"], "prompt": row["prompt"]})
        return item

    def _text_fields(self, raw: dict[str, bytes]) -> dict[str, torch.Tensor]:
        """The zero-padded [max_length, D] row from the stored valid tokens, its length and mask."""
        text = self.config.text
        length = int(raw[LENGTH])
        padded = np.zeros((text.max_length, text.dim), dtype=self.config.storage_dtype)
        padded[:length] = npy_array(raw[TEXT])
        return {"text_embeddings": torch.from_numpy(padded), "text_length": torch.tensor(length, dtype=torch.int64),
                "text_mask": torch.from_numpy(np.arange(text.max_length) < length)}


def _records(location: str, url: str, storage_options: dict[str, Any]) -> tuple[str, dict[str, Any], list[str]]:
    """(location, cache_config.json, SHA256SUMS lines) of the committed WebDataset cache at `location`."""
    store = Storage(location, storage_options)
    if not store.exists(CACHE_CONFIG):
        raise ConfigError(f"{url} is not a latentforge cache: it has no {CACHE_CONFIG}")
    data = json.loads(store.read(CACHE_CONFIG))
    if sink_in(data) != SINK:
        raise ConfigError(f"{url} is not a WebDataset cache but an {sink_in(data)} one, which "
                          f"StreamingLatentDataset cannot read: read it with latentforge.LatentCacheDataset"
                          f"({url!r}) (a local folder; `latentforge fetch` one from object storage)")
    if not store.exists(COMPLETE_MARKER):
        raise CacheIntegrityError(f"{url}: no {COMPLETE_MARKER}, so no whole cache is there: a build or a publish "
                                  "is writing it; finish it (or wait for its _SUCCESS) and open it again")
    return location, data, store.read(SUMS).decode("utf-8").splitlines()
