"""How much of its captions a cache's text encoder could read: the distribution of the manifest's
unknown_token_fraction (the share of a caption's tokens the tokenizer does not know, docs/text.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..cache.rows import ManifestRow

# histogram bins: exactly 0, then (0, 0.1], (0.1, 0.2], ... (0.9, 1]
BIN_LABELS = ("0",) + tuple(f"({k / 10:g}, {(k + 1) / 10:g}]" for k in range(10))
_WORST = 10


@dataclass
class UnknownCaption:
    dataset_index: int
    sample_id: str
    unknown_token_fraction: float
    prompt: str


@dataclass
class UnknownTokenStats:
    max_unknown_fraction: float  # the build's text.max_unknown_fraction
    measured: int = 0  # rows that record a fraction
    not_measured: int = 0  # rows that do not (pickle rows, caches built before it was recorded)
    with_unknown: int = 0  # fraction > 0
    over_limit: int = 0  # fraction > max_unknown_fraction
    mean: float | None = None
    max: float | None = None
    histogram: dict[str, int] = field(default_factory=lambda: dict.fromkeys(BIN_LABELS, 0))
    worst: list[UnknownCaption] = field(default_factory=list)  # the highest fractions above 0, at most 10


def _bin(fraction: float) -> str:
    if fraction <= 0:
        return BIN_LABELS[0]
    return BIN_LABELS[next((k for k in range(1, 10) if fraction <= k / 10), 10)]


class UnknownTokenAccumulator:
    def __init__(self, max_unknown_fraction: float):
        self.stats = UnknownTokenStats(max_unknown_fraction)
        self._total = 0.0
        self._seen: list[UnknownCaption] = []

    def add(self, row: ManifestRow) -> None:
        fraction = row.unknown_token_fraction
        stats = self.stats
        if fraction is None:
            stats.not_measured += 1
            return
        stats.measured += 1
        self._total += fraction
        stats.max = fraction if stats.max is None else max(stats.max, fraction)
        stats.histogram[_bin(fraction)] += 1
        if fraction > 0:
            stats.with_unknown += 1
            self._seen.append(UnknownCaption(row.dataset_index, row.sample_id, fraction, row.prompt))
            self._seen = sorted(self._seen, key=lambda c: (-c.unknown_token_fraction, c.dataset_index))[:_WORST]
        if fraction > stats.max_unknown_fraction:
            stats.over_limit += 1

    def result(self) -> UnknownTokenStats:
        stats = self.stats
        stats.mean = self._total / stats.measured if stats.measured else None
        stats.worst = list(self._seen)
        return stats


def unknown_summary(stats: UnknownTokenStats) -> str:
    """One line for the summary tables: how many captions hold unknown tokens, how many over the limit, the worst."""
    if not stats.measured:
        return f"not recorded for the {stats.not_measured} rows (pickle text, or built before it was recorded)"
    line = (f"{stats.with_unknown} of {stats.measured} captions hold some, {stats.over_limit} more than "
            f"{stats.max_unknown_fraction:.0%} (mean {stats.mean:.1%}, max {stats.max:.0%})")
    if stats.worst:
        line += "; worst: " + ", ".join(f"{c.sample_id} {c.unknown_token_fraction:.0%}" for c in stats.worst[:3])
    return line
