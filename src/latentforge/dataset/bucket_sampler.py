"""BucketBatchSampler: batches of one bucket each, for BucketedLatentDataset (docs/dataset.md, "Buckets").

An epoch is a fixed sequence of global batches, a function of (seed, epoch, bucket sizes, batch sizes,
weights) only. Each bucket's indices are shuffled and cut into batches of that bucket's size; without weights
every batch of every bucket comes once, in a shuffled order; with weights each of the epoch's batches picks its
bucket with probability proportional to the weight (a bucket that runs out starts a fresh shuffle of itself).
Replica r takes global batches r, r + R, r + 2R, ... of the first multiple of R, so no two replicas share a batch
and all take the same number of steps. The state is the global batch position, so a run may resume mid-epoch,
on another replica count too, and yields exactly the batches not yet consumed.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import torch.distributed as dist
from torch.utils.data import Sampler

from ..errors import ConfigError

_FIXED = ("bucket_sizes", "batch_sizes", "weights", "seed", "shuffle", "drop_last")


def _per_bucket(value: int | Mapping[str, int], names: Sequence[str], what: str) -> list[int]:
    if isinstance(value, Mapping):
        missing = [name for name in names if name not in value]
        if missing:
            raise ConfigError(f"{what} has no value for bucket(s) {missing}; give one per bucket of {list(names)}")
        return [int(value[name]) for name in names]
    return [int(value)] * len(names)


def _weights(weights: Mapping[str, float], names: Sequence[str]) -> list[float]:
    missing = [name for name in names if name not in weights]
    if missing:
        raise ConfigError(f"weights has no value for bucket(s) {missing}; give one per bucket of {list(names)}")
    return [float(weights[name]) for name in names]


class BucketBatchSampler(Sampler[list[int]]):
    """`bucket_sizes`: samples per bucket, in the dataset's order (BucketedLatentDataset.bucket_sizes).
    The batch size per bucket is `batch_size` (one int, or one per bucket name) or, with `token_budget`, the most
    samples whose `tokens_per_sample` fit in it (at least 1)."""

    def __init__(self, bucket_sizes: Mapping[str, int], batch_size: int | Mapping[str, int] | None = None, *,
                 token_budget: int | None = None, tokens_per_sample: Mapping[str, int] | None = None,
                 weights: Mapping[str, float] | None = None, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False, num_replicas: int | None = None, rank: int | None = None):
        if num_replicas is None:
            num_replicas = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
        if rank is None:
            rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ConfigError(f"BucketBatchSampler(num_replicas={num_replicas}, rank={rank}): need num_replicas >= 1 "
                              "and 0 <= rank < num_replicas")
        self.names = list(bucket_sizes)
        self.bucket_sizes = [int(bucket_sizes[name]) for name in self.names]
        if (batch_size is None) == (token_budget is None):
            raise ConfigError("give BucketBatchSampler either batch_size or token_budget (with tokens_per_sample)")
        if token_budget is not None:
            if tokens_per_sample is None:
                raise ConfigError("token_budget needs tokens_per_sample (BucketedLatentDataset.tokens_per_sample)")
            tokens = _per_bucket(tokens_per_sample, self.names, "tokens_per_sample")
            self.batch_sizes = [max(1, token_budget // t) for t in tokens]
        else:
            self.batch_sizes = _per_bucket(batch_size, self.names, "batch_size")
        if any(size < 1 for size in self.batch_sizes):
            raise ConfigError(f"batch sizes {dict(zip(self.names, self.batch_sizes))} must be >= 1")
        self.weights = None if weights is None else _weights(weights, self.names)
        if self.weights is not None and (any(w < 0 for w in self.weights) or sum(self.weights) <= 0):
            raise ConfigError(f"weights {weights} must be >= 0 with a positive sum")
        self.shuffle, self.seed, self.drop_last = shuffle, seed, drop_last
        self.num_replicas, self.rank = num_replicas, rank
        self.epoch = 0
        self._start = 0  # global batch position the current iteration started from
        self._yielded = 0  # batches this replica has yielded in the current iteration
        self._resume_at: int | None = None

    def set_epoch(self, epoch: int) -> None:
        """Call before each epoch; a resumed epoch keeps its position."""
        if epoch != self.epoch:
            self._resume_at, self._start, self._yielded = None, 0, 0
        self.epoch = epoch

    def _bucket_batches(self, slot: int, rng: np.random.Generator) -> list[list[int]]:
        offset = sum(self.bucket_sizes[:slot])
        size, batch = self.bucket_sizes[slot], self.batch_sizes[slot]
        order = rng.permutation(size) if self.shuffle else np.arange(size)
        batches = [[offset + int(i) for i in order[k:k + batch]] for k in range(0, size, batch)]
        return [b for b in batches if len(b) == batch] if self.drop_last else batches

    def epoch_batches(self) -> list[list[int]]:
        """Every global batch of this epoch, before it is split across replicas."""
        rng = np.random.default_rng([self.seed, self.epoch])
        per_bucket = [self._bucket_batches(slot, rng) for slot in range(len(self.names))]
        if self.weights is None:
            batches = [b for bucket in per_bucket for b in bucket]
            return [batches[i] for i in rng.permutation(len(batches))] if self.shuffle else batches
        total = sum(len(bucket) for bucket in per_bucket)
        if not total:
            return []
        # A bucket without a batch (empty, e.g. every sample rejected, or short of drop_last's batch) is never drawn.
        drawable = [weight if bucket else 0.0 for weight, bucket in zip(self.weights, per_bucket)]
        if not sum(drawable):
            raise ConfigError(f"weights {dict(zip(self.names, self.weights))} are positive only for buckets without "
                              f"a batch (samples {dict(zip(self.names, self.bucket_sizes))}); weight one that has one")
        probabilities = np.asarray(drawable) / sum(drawable)
        cursors = [0] * len(per_bucket)
        batches = []
        for slot in rng.choice(len(per_bucket), size=total, p=probabilities):
            if cursors[slot] == len(per_bucket[slot]):  # oversampled: a fresh shuffle of that bucket
                per_bucket[slot] += self._bucket_batches(int(slot), rng)
            batches.append(per_bucket[slot][cursors[slot]])
            cursors[slot] += 1
        return batches

    def _usable(self) -> list[list[int]]:
        batches = self.epoch_batches()
        return batches[: len(batches) // self.num_replicas * self.num_replicas]

    def __iter__(self) -> Iterator[list[int]]:
        self._start = self._resume_at or 0
        self._resume_at = None
        self._yielded = 0
        for batch in self._usable()[self._start + self.rank :: self.num_replicas]:
            self._yielded += 1
            yield batch

    def __len__(self) -> int:
        return max(0, len(self._usable()) - (self._resume_at or 0)) // self.num_replicas

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        """`consumed`: batches this replica has trained on this epoch (default: what it has yielded)."""
        done = self._yielded if consumed is None else consumed
        state = {"epoch": self.epoch, "position": self._start + done * self.num_replicas}
        state.update({key: getattr(self, key) for key in _FIXED})
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue `state`'s epoch at its position; the next iteration yields only what was not consumed."""
        for key in _FIXED:
            if state[key] != getattr(self, key):
                raise ConfigError(f"sampler state has {key}={state[key]!r} but this sampler has "
                                  f"{getattr(self, key)!r}; resume with the same dataset and settings, or start over")
        self.epoch = int(state["epoch"])
        self._start = self._resume_at = int(state["position"])
        self._yielded = 0
