"""Which windows are near duplicates of an earlier kept one, from their embeddings in plan order (docs/dedup.md).

Walking the windows in plan order, a window whose cosine similarity to a kept window reaches the threshold is a near
duplicate of the most similar such window (the earliest on a tie); any other window is kept. Each kept window leads
its group and is the only one of it in the cache. A window is compared with kept windows only, and only with those
before it, so the decisions over a prefix of the plan never depend on what follows: `--extend` keeps every earlier
decision and compares the new windows with the kept ones.

Every decision is an exact function of the float32 vectors, the same on any machine: a similarity is their dot
product exactly rounded (math.fsum over products, each exact in float64) divided by the square root of the product
of their exactly rounded squared norms, IEEE operations that round the same everywhere. A float32 matrix product,
whose summation order varies with the BLAS and the CPU, only screens: its error for vectors of D components is below
D * 2**-24 (times their norms), so a pair it places further than twice that from the threshold is decided by it,
and the few pairs within that margin are computed exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

_BLOCK = 256  # windows screened against the kept ones in one matrix product


@dataclass(frozen=True)
class Duplicate:
    """A near duplicate: the position (in the vectors given) of the kept window it is nearest to, and their
    exact cosine similarity."""

    of: int
    similarity: float


class _Exact:
    """Exactly rounded cosine similarities between rows of `vectors`, squared norms computed once per row."""

    def __init__(self, vectors: np.ndarray):
        self.rows = vectors.astype(np.float64)  # float32 -> float64 is exact, and so is each product of two
        self.norms: dict[int, float] = {}

    def _norm(self, i: int) -> float:
        if i not in self.norms:
            self.norms[i] = math.fsum((self.rows[i] * self.rows[i]).tolist())
        return self.norms[i]

    def __call__(self, i: int, j: int) -> float:
        dot = math.fsum((self.rows[i] * self.rows[j]).tolist())
        return max(-1.0, min(1.0, dot / math.sqrt(self._norm(i) * self._norm(j))))


def near_duplicates(vectors: np.ndarray, threshold: float, fixed: np.ndarray | None = None
                    ) -> list[Duplicate | None]:
    """For each row of `vectors` (float32 [N, D] of unit length, in plan order): None when it is kept, else the
    kept window it duplicates. Rows where `fixed` is True are kept without a decision (windows an earlier run
    decided): they only lead their groups."""
    count, width = vectors.shape
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    floor = threshold - (2 * width * 2.0**-24 + 1e-6)  # below it, the screen's value proves the pair apart
    exact = _Exact(vectors)
    kept = np.empty((count, width), np.float32)
    kept_at = np.empty(count, np.int64)
    found = 0
    out: list[Duplicate | None] = [None] * count
    for start in range(0, count, _BLOCK):
        block = vectors[start:start + _BLOCK]
        before = block @ kept[:found].T  # every kept window before the block
        within = block @ block.T
        block_first = found
        for j in range(len(block)):
            position = start + j
            if fixed is None or not fixed[position]:
                inside = kept_at[block_first:found] - start
                candidates = np.concatenate([kept_at[:block_first][before[j] >= floor],
                                             kept_at[block_first:found][within[j, inside] >= floor]])
                out[position] = _nearest(exact, position, candidates, threshold)
            if out[position] is None:
                kept[found], kept_at[found] = block[j], position
                found += 1
    return out


def _nearest(exact: _Exact, position: int, candidates: np.ndarray, threshold: float) -> Duplicate | None:
    """The candidate (kept positions, ascending) most similar to `position` at or above the threshold; the earliest
    on a tie."""
    best: Duplicate | None = None
    for kept in candidates.tolist():
        similarity = exact(position, kept)
        if similarity >= threshold and (best is None or similarity > best.similarity):
            best = Duplicate(kept, similarity)
    return best
