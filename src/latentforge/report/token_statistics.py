"""Statistics of a discrete-token cache, streamed one sample at a time: what a sequence model will see.

Per cache: the sequence-length histogram (one modality's ids flattened, T'·H'·W'), vocabulary utilisation (the
fraction of the vocabulary's ids that occur, and for FSQ ids the fraction of each level's values that occur),
token frequencies (the top ids and the rank-frequency curve), and each sample's entropy (bits, of its own id
distribution) with the lowest-entropy samples listed: near-constant clips a trainer may want to drop.
docs/stats.md describes every field.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..cache.config_sections import TokenSection

TOP_IDS = 20  # ids listed by name in the frequency table
LOW_ENTROPY_LISTED = 10  # lowest-entropy samples listed


@dataclass
class LowEntropySample:
    dataset_index: int
    sample_id: str
    entropy_bits: float
    distinct_ids: int


@dataclass
class TokenStats:
    vocabulary: int
    fsq_levels: list[int] | None
    num_tokens: int  # ids read, every modality
    sequence_lengths: dict[int, int]  # one modality's flattened length -> samples
    used_ids: int
    utilisation: float  # used_ids / vocabulary
    level_utilisation: list[float] | None  # per FSQ code channel: the fraction of its levels that occur
    top_ids: list[list[float]]  # [id, count, fraction of all ids], most frequent first
    rank_frequency: list[int]  # the counts of the used ids, largest first
    entropy_bits: dict[str, float]  # per-sample entropy: mean, min, max
    low_entropy: list[LowEntropySample] = field(default_factory=list)


class TokenAccumulator:
    def __init__(self, tokens: TokenSection):
        self.tokens = tokens
        self.counts = np.zeros(tokens.vocabulary, dtype=np.int64)
        self.lengths: dict[int, int] = {}
        self.entropies: list[tuple[float, int, int]] = []  # (entropy, dataset_index, distinct ids)

    def add(self, dataset_index: int, ids: np.ndarray) -> None:
        """Merge one sample's [M, T', H', W'] ids."""
        flat = ids.astype(np.int64).reshape(-1)
        self.counts += np.bincount(flat, minlength=self.tokens.vocabulary)
        length = int(np.prod(ids.shape[1:]))
        self.lengths[length] = self.lengths.get(length, 0) + 1
        _, counts = np.unique(flat, return_counts=True)
        p = counts / counts.sum()
        self.entropies.append((float(-(p * np.log2(p)).sum()) + 0.0, dataset_index, len(counts)))

    def result(self, sample_ids: dict[int, str]) -> TokenStats:
        total = int(self.counts.sum())
        used = np.flatnonzero(self.counts)
        order = np.argsort(-self.counts, kind="stable")
        top = [[int(i), int(self.counts[i]), float(self.counts[i] / total)] for i in order[:TOP_IDS] if self.counts[i]]
        entropies = np.array([e for e, _, _ in self.entropies])
        lowest = sorted(self.entropies)[:LOW_ENTROPY_LISTED]
        return TokenStats(
            vocabulary=self.tokens.vocabulary,
            fsq_levels=None if self.tokens.levels is None else list(self.tokens.levels),
            num_tokens=total, sequence_lengths=dict(sorted(self.lengths.items())), used_ids=len(used),
            utilisation=len(used) / self.tokens.vocabulary, level_utilisation=self._level_utilisation(used),
            top_ids=top, rank_frequency=sorted((int(c) for c in self.counts[used]), reverse=True),
            entropy_bits={"mean": float(entropies.mean()), "min": float(entropies.min()),
                          "max": float(entropies.max())},
            low_entropy=[LowEntropySample(index, sample_ids.get(index, ""), entropy, distinct)
                         for entropy, index, distinct in lowest])

    def _level_utilisation(self, used: np.ndarray) -> list[float] | None:
        """Per FSQ channel c, the fraction of its L_c levels some used id has: level_c = (id // basis_c) % L_c."""
        levels = self.tokens.levels
        if levels is None:
            return None
        basis = np.cumprod([1, *levels[:-1]])
        return [len(np.unique((used // b) % n)) / n for b, n in zip(basis, levels)]
