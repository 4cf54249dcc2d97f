"""The limit on rejects: a build that keeps nothing, or rejects more than run.max_reject_fraction of its
candidates, stops with the top reasons, an example of each and its fix. Checked after the probe (before any
GPU work) and again over every reject before commit, so rejects found while decoding count too."""

from __future__ import annotations

from collections import Counter

from ..errors import REJECT_FIXES
from ..records import Reject

TOP_REASONS = 3


def reject_problem(candidates: int, rejects: list[Reject], limit: float, when: str) -> str | None:
    """None when the rejects are within the limit; otherwise the message (headline, then one line per reason).

    `candidates` counts every planned sample, rejected or not; `when` says which rejects were counted."""
    if not rejects or candidates <= 0:
        return None
    accepted = candidates - len(rejects)
    if accepted > 0 and len(rejects) / candidates <= limit:
        return None
    if accepted <= 0:
        headline = f"all {candidates} samples were rejected {when}; nothing to cache"
    else:
        headline = (f"{len(rejects)} of {candidates} samples were rejected {when}, more than "
                    f"run.max_reject_fraction={limit:g}; raise it with --max-reject-fraction if that is expected")
    counts = Counter(r.reason for r in rejects)
    lines = [headline + ". Top reasons:"]
    for reason, count in counts.most_common(TOP_REASONS):
        example = next(r for r in rejects if r.reason == reason)
        lines.append(f"  {reason} x{count}: {REJECT_FIXES[reason]} (e.g. {example.sample_id}: {example.detail})")
    if len(counts) > TOP_REASONS:
        lines.append(f"  and {len(counts) - TOP_REASONS} more reason(s); `latentforge scan` lists every reject")
    return "\n".join(lines)
