"""BucketedLatentDataset: every bucket of a bucketed root as one map-style dataset, for BucketBatchSampler.

Index i runs over the buckets in index order: bucket k holds [offsets[k], offsets[k + 1]). A batch must come
from one bucket (its tensors have one shape); BucketBatchSampler makes such batches.

The index and the buckets come from one whole generation of the root: while a rerun or an `--extend` swaps a new
one in (cache/generation_swap.py), both are read from build/swap, which links every file of the new root's
buckets, those not yet moved into their folders too.
"""

from __future__ import annotations

import bisect
import math
import os
from pathlib import Path
from typing import Any, Sequence

from torch.utils.data import Dataset

from ...cache.bucket_index import BucketIndex
from ...cache.expect import CacheExpectation
from ...cache.layout import COMPLETE_MARKER
from ...cache.whole_read import read_whole
from ...errors import CacheIntegrityError, ConfigError
from .dataset import LatentCacheDataset
from .row_reader import MAX_OPEN_SHARDS


class BucketedLatentDataset(Dataset):
    """Items are LatentCacheDataset items plus `bucket` (its name); `dataset_index` stays the bucket's own."""

    def __init__(self, root: str | os.PathLike[str], modalities: Sequence[str] | None = None,
                 expect: CacheExpectation | dict[str, Any] | None = None, *, text: bool = True,
                 require_complete: bool = True, max_open_shards: int = MAX_OPEN_SHARDS):
        self.root = Path(root)
        options = {"modalities": modalities, "expect": expect, "text": text, "require_complete": require_complete}
        # the index and every bucket it names from one whole generation of the root, even while a rerun or an
        # extend swaps in a new one
        self.index, self.buckets = read_whole(self.root, lambda published: _open(self.root, published, options,
                                                                                 max_open_shards))
        self.names = list(self.buckets)
        self.offsets = [0]
        for dataset in self.buckets.values():
            self.offsets.append(self.offsets[-1] + len(dataset))

    def __len__(self) -> int:
        return self.offsets[-1]

    @property
    def bucket_sizes(self) -> dict[str, int]:
        return {name: len(dataset) for name, dataset in self.buckets.items()}

    @property
    def tokens_per_sample(self) -> dict[str, int]:
        """Latent positions T' x H' x W' of one sample of each bucket (what a token budget counts)."""
        return {name: math.prod(dataset.latent_shape[1:]) for name, dataset in self.buckets.items()}

    def locate(self, index: int) -> tuple[str, int]:
        """(bucket name, index within the bucket) of a global index."""
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} samples")
        slot = bisect.bisect_right(self.offsets, index) - 1
        return self.names[slot], index - self.offsets[slot]

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        located = [self.locate(int(index)) for index in indices]
        names = sorted({name for name, _ in located})
        if len(names) > 1:
            raise ConfigError(f"a batch mixes buckets {names}; their latents have different shapes, so draw "
                              "batches with BucketBatchSampler")
        items = self.buckets[names[0]].__getitems__([local for _, local in located]) if located else []
        for item in items:
            item["bucket"] = names[0]
        return items

    def empty_prompt(self) -> dict[str, Any]:
        """The empty prompt's text (the same encoder wrote every bucket)."""
        return self.buckets[self.names[0]].empty_prompt()


def _index(top: Path, require_complete: bool) -> BucketIndex:
    if require_complete and not (top / COMPLETE_MARKER).is_file():
        raise CacheIntegrityError(f"{top} has no {COMPLETE_MARKER}: the bucketed build has not finished; rerun it, "
                                  "or pass require_complete=False to read the finished buckets")
    return BucketIndex.load(top)


def _open(root: Path, published: Path, options: dict[str, Any], max_open_shards: int
          ) -> tuple[BucketIndex, dict[str, LatentCacheDataset]]:
    """The index in `published` (the root, or its build/swap while a swap moves a new generation in) and the buckets
    it names, each read from `published` too: a bucket the swap has not moved into its folder yet is read whole
    there, and finds its shards in its folder under `root` once the swap is done."""
    index = _index(published, options["require_complete"])
    entries = [e for e in index.filled if (published / str(e.path) / COMPLETE_MARKER).is_file()
               or options["require_complete"]]
    if not entries:
        raise ConfigError(f"{root}: no bucket holds samples")
    share = max(1, max_open_shards // len(entries))  # the bound is the whole dataset's
    return index, {e.name: LatentCacheDataset(root / str(e.path), max_open_shards=share, **options,
                                              generation=published / str(e.path) if published != root else None)
                   for e in entries}
