"""Which item of a timed stream is shown at each of a window's times: the rule of docs/frames.md (the last item whose
time is at or before the wanted time) for mask and depth sources at another rate and for per-frame side streams
(docs/modalities.md). Times are seconds counted from each stream's own first frame or row origin."""

from __future__ import annotations

import bisect
import math
from typing import Sequence

from .window import PTS_EPSILON

# Two streams' timestamps are rounded by their own time bases (MKV keeps whole milliseconds, so 1/15 s is stored as
# 0.067 while an MP4 stores 2/30 s as 0.06667): across streams, a time within 1 ms counts as the same time.
CROSS_STREAM_SLACK = 0.001


def shown_at(times: Sequence[float], wanted: Sequence[float], hold: float = math.inf, tail: float = 0.0,
             slack: float = PTS_EPSILON) -> list[int]:
    """For each wanted time t, the index of the last item whose time is <= t + slack, or -1 where the stream
    does not cover t: no item at or before it, the chosen item more than `hold` seconds before it, or t more than
    `tail` seconds past the last item. `times` ascending."""
    found = []
    for t in wanted:
        j = bisect.bisect_right(times, t + slack) - 1
        covered = j >= 0 and t - times[j] <= hold + slack and t <= times[-1] + tail + slack
        found.append(j if covered else -1)
    return found


def coverage_text(times: Sequence[float], tail: float, wanted: Sequence[float]) -> str:
    """'covers A..B s, the window needs C..D s': the times a stream covers against the window's."""
    covered = "nothing" if not times else f"{times[0]:.3f}..{times[-1] + tail:.3f} s"
    return f"covers {covered}, the window needs {wanted[0]:.3f}..{wanted[-1]:.3f} s"
