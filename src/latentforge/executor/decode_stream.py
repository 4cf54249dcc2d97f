"""CPU decode workers that run ahead of the encoder: one ordered stream of decoded samples across units.

The encoder thread pulls samples in source_index order; each pull first tops the look-ahead window up
(`2 x workers` samples in flight), taking the next unit from the shared queue when the current one is
fully submitted, so the encoder does not wait at unit boundaries. All submissions happen on the rank's
main thread, which is therefore the thread that spawned the workers (PR_SET_PDEATHSIG is per thread).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterator

from ..config import BuildConfig
from ..pipeline.unit import Decoded, Unit, decode_sample
from .process_setup import child_process_setup, child_signals_held, dump_stacks_on_sigusr1, stacks_file

_worker_config: BuildConfig | None = None


def _init_worker(config: BuildConfig, stacks: tuple[str, str] | None) -> None:
    global _worker_config
    child_process_setup()
    dump_stacks_on_sigusr1(lambda: [], stacks_file(*stacks) if stacks is not None else None)
    _worker_config = config


def _decode_in_worker(unit: Unit, position: int) -> Decoded:
    sample = unit.samples[position]
    return decode_sample(sample, unit.probes[sample.source_index], _worker_config)


@dataclass
class _Slot:
    unit: Unit
    position: int
    outcome: Future | None  # None: decode inline when pulled (workers = 0)


class DecodeStream:
    """Yields (unit, decoded samples of that unit) for every unit `next_unit()` hands out, in order."""

    def __init__(self, config: BuildConfig, next_unit: Callable[[], Unit | None], workers: int,
                 stacks: tuple[str, str] | None = None):
        """stacks: (build_dir, role) of the workers' SIGUSR1 dump files; None dumps to stderr."""
        self.config = config
        self._next_unit = next_unit
        self._window = 2 * workers
        self._pool: ProcessPoolExecutor | None = None
        if workers > 0:
            self._pool = ProcessPoolExecutor(workers, multiprocessing.get_context("spawn"), _init_worker,
                                             (config, stacks))
        self._slots: deque[_Slot] = deque()
        self._feeding: Unit | None = None
        self._fed = 0
        self._exhausted = False
        self.wait_seconds = 0.0  # time the encoder spent waiting for decoded samples
        self.decode_seconds = 0.0
        self.worker_cpu_seconds = 0.0

    @property
    def queued_samples(self) -> int:
        """Samples handed to decode (or decoded) and not yet taken by the encoder."""
        return len(self._slots)

    def worker_pids(self) -> list[int]:
        return list(self._pool._processes) if self._pool is not None and self._pool._processes else []

    def _take_unit(self) -> bool:
        if self._exhausted:
            return False
        unit = self._next_unit()
        if unit is None:
            self._exhausted = True
            return False
        self._feeding, self._fed = unit, 0
        return True

    def _top_up(self) -> None:
        """Keep the window full; with no workers, only make sure the next sample is known."""
        want = self._window if self._pool is not None else 1
        while len(self._slots) < want:
            if self._feeding is None or self._fed == len(self._feeding.samples):
                if not self._take_unit():
                    return
                continue
            unit, position = self._feeding, self._fed
            outcome = None
            if self._pool is not None:
                with child_signals_held():  # a submit may start a worker process
                    outcome = self._pool.submit(_decode_in_worker, unit, position)
            self._slots.append(_Slot(unit, position, outcome))
            self._fed += 1

    def _pull(self) -> Decoded:
        slot = self._slots.popleft()
        self._top_up()  # refill before blocking, so workers keep going while this sample is encoded
        if slot.outcome is None:
            sample = slot.unit.samples[slot.position]
            decoded = decode_sample(sample, slot.unit.probes[sample.source_index], self.config)
            self.wait_seconds += decoded.seconds  # the encoder itself decoded: all of it is waiting
        else:
            started = time.perf_counter()
            decoded = slot.outcome.result()
            self.wait_seconds += time.perf_counter() - started
        self.decode_seconds += decoded.seconds
        self.worker_cpu_seconds += decoded.cpu_seconds if slot.outcome is not None else 0.0
        return decoded

    def _samples_of(self, unit: Unit) -> Iterator[Decoded]:
        while self._slots and self._slots[0].unit is unit:
            yield self._pull()

    def units(self) -> Iterator[tuple[Unit, Iterator[Decoded]]]:
        while True:
            self._top_up()
            if not self._slots:
                return
            unit = self._slots[0].unit
            yield unit, self._samples_of(unit)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def abort(self) -> None:
        """Stop now (a signal or an error): terminate the workers instead of waiting for their decodes."""
        if self._pool is not None:
            for pid in self.worker_pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
        self.close()
