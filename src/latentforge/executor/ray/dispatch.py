"""The unit queue of a Ray build: one small actor on the driver's node that workers pull units from.

It only keeps books (which worker holds which unit, how often a unit's worker failed, what was staged);
units go to workers as plan records, pickled by the driver and unpickled by the worker that takes them, and
staged data never passes through it. So its process never imports what a plan record is made of (torch and
PyAV, through the probe and the tokenizers: seconds of CPU per build). Plain Python so that the bookkeeping is
testable without Ray; the driver wraps it with `ray.remote`.
"""

from __future__ import annotations

import pickle
from collections import Counter, defaultdict, deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..events import UnitStaged

if TYPE_CHECKING:
    from ...pipeline.unit_inputs import Unit


@dataclass(frozen=True)
class QueuedUnit:
    """A unit as the queue holds it: its plan record as bytes, and what a charge names."""

    index: int
    first_sample: str
    last_sample: str
    record: bytes  # the pickled Unit

    @classmethod
    def of(cls, unit: Unit) -> QueuedUnit:
        samples = unit.samples
        return cls(unit.index, samples[0].sample_id, samples[-1].sample_id,
                   pickle.dumps(unit, protocol=pickle.HIGHEST_PROTOCOL))

    def unit(self) -> Unit:
        return pickle.loads(self.record)


@dataclass(frozen=True)
class Charge:
    """The unit a failed worker was running, and how many of its attempts have now failed."""

    unit: int
    tries: int
    first_sample: str
    last_sample: str


class UnitDispatcher:
    """Hands out units in plan order; a failed worker's units go back to the front of the queue."""

    def __init__(self, units: list[QueuedUnit]):
        self._units = {u.index: u for u in units}
        self._pending: deque[int] = deque(sorted(self._units))
        # Units a worker took and has not staged, in the order taken. Staging is synchronous in a worker,
        # so the first one is always the unit it is encoding; the rest are decoded ahead.
        self._held: dict[int, list[int]] = defaultdict(list)
        self._tries: Counter[int] = Counter()
        self._events: list[UnitStaged] = []
        self._left = len(self._units)

    def take(self, worker: int) -> QueuedUnit | None:
        if not self._pending:
            return None
        index = self._pending.popleft()
        self._held[worker].append(index)
        return self._units[index]

    def staged(self, event: UnitStaged) -> None:
        held = self._held[event.rank]
        if event.unit in held:
            held.remove(event.unit)
            self._left -= 1
            self._events.append(event)

    def pending(self) -> int:
        """Units in the queue, not held by any worker."""
        return len(self._pending)

    def drain(self) -> tuple[list[UnitStaged], int]:
        """(staged events since the last drain, units not staged yet)."""
        events, self._events = self._events, []
        return events, self._left

    def release(self, worker: int) -> Charge | None:
        """The worker stopped on an error or died: requeue what it held and charge the unit it was running.
        None when it held nothing (it failed before taking a unit)."""
        held = self._held.pop(worker, [])
        self._pending.extendleft(reversed(held))
        if not held:
            return None
        unit = held[0]
        self._tries[unit] += 1
        queued = self._units[unit]
        return Charge(unit, self._tries[unit], queued.first_sample, queued.last_sample)
