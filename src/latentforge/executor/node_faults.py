"""Which Ray nodes look at fault, from the ranks' stats: excluded by the node check, or failing to decode far
more often than the rest of the cluster.

The decode rule: a node is reported when its ranks rejected at least DECODE_FAULT_MIN samples as
`decode_error` or `unreadable` while decoding, and its rate of such rejects (per sample its ranks ran) is at
least DECODE_FAULT_RATIO times the rate of all other nodes together. Bad files fail on every node at the same
rate; one node failing far more often points at that node (a stale mount, a broken codec library). A node
compared with nothing (the only node that ran samples) is never reported.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

from .rank_stats import RankStats

DECODE_FAULT_MIN = 3
DECODE_FAULT_RATIO = 4.0
DECODE_REASONS = ("decode_error", "unreadable")


def _decode_failures(stats: RankStats) -> int:
    return sum(stats.rejects.get(reason, 0) for reason in DECODE_REASONS)


def node_faults(ranks: Iterable[RankStats]) -> list[dict[str, Any]]:
    """[{"node", "kind": "excluded" | "decode_failures", "detail"}], one entry per node and kind."""
    ranks = [r for r in ranks if r.node]
    faults = []
    excluded: dict[str, str] = {}
    for rank in ranks:
        if rank.node_check:
            excluded.setdefault(rank.node, rank.node_check)
    faults += [{"node": node, "kind": "excluded", "detail": detail} for node, detail in sorted(excluded.items())]
    samples: dict[str, int] = defaultdict(int)
    failures: dict[str, int] = defaultdict(int)
    for rank in ranks:
        samples[rank.node] += rank.samples
        failures[rank.node] += _decode_failures(rank)
    for node in sorted(samples):
        others_samples = sum(n for other, n in samples.items() if other != node)
        if failures[node] < DECODE_FAULT_MIN or not samples[node] or not others_samples:
            continue
        rate = failures[node] / samples[node]
        others_rate = sum(n for other, n in failures.items() if other != node) / others_samples
        if rate >= DECODE_FAULT_RATIO * others_rate:
            faults.append({"node": node, "kind": "decode_failures",
                           "detail": f"{failures[node]} of {samples[node]} samples failed to decode on this node "
                                     f"({rate:.0%}), {others_rate:.0%} on the other nodes"})
    return faults
