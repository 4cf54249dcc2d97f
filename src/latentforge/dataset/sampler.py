"""A resumable, DDP-aware sampler whose fresh epochs equal torch's DistributedSampler.

Position is kept globally (samples consumed by all replicas together in this epoch), so a run resumed with
a different number of replicas continues with exactly the indices not yet seen.
"""

from __future__ import annotations

import math
from typing import Any, Iterator

import torch
import torch.distributed as dist
from torch.utils.data import Sampler

from ..errors import ConfigError


class ResumableSampler(Sampler[int]):
    """Shuffled (seed + epoch) indices split across replicas like DistributedSampler, with a resumable state.

    `state_dict()` records how far this epoch got. Iterated directly, the sampler knows what it has yielded;
    behind a DataLoader it runs ahead by the prefetched batches, so pass what the trainer really consumed:
    `state_dict(consumed=steps_this_epoch * batch_size)` (per replica).
    """

    def __init__(
        self,
        num_samples: int,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ):
        if num_replicas is None:
            num_replicas = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
        if rank is None:
            rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
        if num_samples < 1 or num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ConfigError(
                f"ResumableSampler(num_samples={num_samples}, num_replicas={num_replicas}, rank={rank}): need "
                "num_samples >= 1, num_replicas >= 1 and 0 <= rank < num_replicas"
            )
        self.num_samples = num_samples
        self.num_replicas = num_replicas
        self.rank = rank
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.epoch = 0
        self._start = 0  # global position the current iteration started from
        self._yielded = 0  # indices this replica has yielded in the current iteration
        self._resume_at: int | None = None  # position the next iteration starts from, after load_state_dict

    def set_epoch(self, epoch: int) -> None:
        """Call before each epoch, as with DistributedSampler; a resumed epoch keeps its position."""
        if epoch != self.epoch:
            self._resume_at = None
            self._start = 0
            self._yielded = 0
        self.epoch = epoch

    def _order(self) -> list[int]:
        if not self.shuffle:
            return list(range(self.num_samples))
        generator = torch.Generator()
        generator.manual_seed(self.seed + self.epoch)
        return torch.randperm(self.num_samples, generator=generator).tolist()

    def _remaining(self, start: int) -> list[int]:
        remaining = self._order()[start:]
        if self.drop_last:
            return remaining[: len(remaining) // self.num_replicas * self.num_replicas]
        padding = -len(remaining) % self.num_replicas
        if padding and remaining:
            remaining += (remaining * math.ceil(padding / len(remaining)))[:padding]
        return remaining

    def __iter__(self) -> Iterator[int]:
        self._start = self._resume_at or 0
        self._resume_at = None
        self._yielded = 0
        mine = self._remaining(self._start)[self.rank :: self.num_replicas]
        for index in mine:
            self._yielded += 1
            yield index

    def __len__(self) -> int:
        return len(self._remaining(self._resume_at or 0)) // self.num_replicas

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        """`consumed`: samples this replica has trained on this epoch (default: what it has yielded)."""
        done = self._yielded if consumed is None else consumed
        position = min(self.num_samples, self._start + done * self.num_replicas)
        return {
            "epoch": self.epoch,
            "position": position,
            "num_samples": self.num_samples,
            "seed": self.seed,
            "shuffle": self.shuffle,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue `state`'s epoch at its position; the next iteration yields only what was not consumed."""
        for key in ("num_samples", "seed", "shuffle"):
            if state[key] != getattr(self, key):
                raise ConfigError(
                    f"sampler state has {key}={state[key]!r} but this sampler has {getattr(self, key)!r}; resume "
                    f"with the same dataset, seed and shuffle, or start a new run"
                )
        self.epoch = int(state["epoch"])
        self._start = self._resume_at = int(state["position"])
        self._yielded = 0
