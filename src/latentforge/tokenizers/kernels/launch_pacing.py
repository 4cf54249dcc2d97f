"""Keeps the host a bounded distance ahead of the GPU while it queues an encoder's kernels.

Left alone, the host queues a whole unit's encoder windows (tens of thousands of kernels) before it first waits.
CUDA's launch queue holds about a thousand, so the launching thread then spins inside the next launch, holding
the GIL: the rank's other threads (the decode stream handing over frames, the staging writer) stall behind it,
and a core burns for nothing. The pacer records an event after each window and, once more than `lead` windows
are queued, sleeps until the oldest is done: a blocking event wait, with the GIL released. The device still has
`lead` windows (hundreds of milliseconds) of work when the host wakes, while queuing a window's few hundred
kernels takes a few milliseconds, so the device never waits for the host.
"""

from __future__ import annotations

from collections import deque
from typing import Callable

import torch

LEAD_WINDOWS = 2


def blocking_event(device: torch.device) -> torch.cuda.Event:
    """An event recorded now on the device's current stream; waiting on it sleeps (the default event spins)."""
    event = torch.cuda.Event(blocking=True)
    event.record(torch.cuda.current_stream(device))
    return event


class LaunchPacer:
    """Call `queued(device)` after launching each window's kernels; on the CPU it does nothing."""

    def __init__(self, lead: int = LEAD_WINDOWS,
                 record: Callable[[torch.device], torch.cuda.Event] = blocking_event):
        if lead < 1:
            raise ValueError(f"lead={lead} must be >= 1: the device needs queued work while the host launches more")
        self.lead = lead
        self._record = record
        self._queued: deque[torch.cuda.Event] = deque()
        self.waits = 0  # how often the host slept because it was `lead` windows ahead

    def queued(self, device: torch.device) -> None:
        if device.type != "cuda":
            return
        self._queued.append(self._record(device))
        while len(self._queued) > self.lead:
            oldest = self._queued.popleft()
            if not oldest.query():
                self.waits += 1
                oldest.synchronize()
