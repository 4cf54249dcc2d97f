"""CPU decode workers that run ahead of the encoder: one ordered stream of decoded samples across units.

The encoder thread pulls samples in source_index order; each pull first tops the look-ahead window up
(`2 x workers` samples in flight), taking the next unit from the shared queue when the current one is
fully submitted, so the encoder does not wait at unit boundaries. All submissions happen on the rank's
main thread, which is therefore the thread that spawned the workers (PR_SET_PDEATHSIG is per thread).

Decoded frames come back through shared-memory slots (frame_slots.py); only their layout is pickled.
Workers run one FFmpeg thread each (run.decode_threads) at a lower priority than the encoder's process,
whose single Python thread launches the GPU's work and must not queue behind decoding.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import os
import signal
import time
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterator

import torch

from ..config import BuildConfig
from ..devices import wait_for_device
from ..pipeline.probe import ProbeResult
from ..pipeline.sample import SamplePixels
from ..pipeline.unit_inputs import Decoded, Unit, decode_sample
from ..records import Reject, Sample
from .frame_slots import FrameSlots, SlotArray, SlotWriter, slot_bytes_for
from .process_setup import child_process_setup, child_signals_held, dump_stacks_on_sigusr1, stacks_file

# Decode workers yield the CPU to the encoder's process (niceness is relative: +5 of the rank's).
WORKER_NICENESS = 5

_worker_config: BuildConfig | None = None
_worker_slots: SlotWriter | None = None


def _init_worker(config: BuildConfig, stacks: tuple[str, str] | None, slots: tuple[str, int] | None) -> None:
    global _worker_config, _worker_slots
    child_process_setup()
    dump_stacks_on_sigusr1(lambda: [], stacks_file(*stacks) if stacks is not None else None)
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICENESS)
    torch.set_num_threads(1)  # workers are the parallelism; torch's own threads would oversubscribe the cores
    _worker_config = config
    _worker_slots = SlotWriter(*slots) if slots is not None else None


def _decode_in_worker(sample: Sample, probe: ProbeResult | Reject, slot: int | None
                      ) -> tuple[Decoded, list[SlotArray] | None]:
    """The decode outcome; with a slot, the frames go into it and only their layout travels back."""
    decoded = decode_sample(sample, probe, _worker_config)
    pixels = decoded.result
    if slot is None or _worker_slots is None or not isinstance(pixels, SamplePixels):
        return decoded, None
    layout = _worker_slots.write(slot, pixels.modalities)
    if layout is None:  # larger than a slot: pickled with the result
        return decoded, None
    return dataclasses.replace(decoded, result=dataclasses.replace(pixels, modalities={})), layout


@dataclass
class _Slot:
    unit: Unit
    position: int
    outcome: Future | None  # None: decode inline when pulled (workers = 0)
    frame_slot: int | None = None  # the shared-memory slot the worker writes the frames into


class DecodeStream:
    """Yields (unit, decoded samples of that unit) for every unit `next_unit()` hands out, in order."""

    def __init__(self, config: BuildConfig, next_unit: Callable[[], Unit | None], workers: int,
                 stacks: tuple[str, str] | None = None, device: torch.device | None = None, frame_bytes: int = 0):
        """stacks: (build_dir, role) of the workers' SIGUSR1 dump files; None dumps to stderr. device: where
        the frames go next (a GPU gets page-locked slots). frame_bytes: frame_slots.source_frame_bytes."""
        self.config = config
        self._next_unit = next_unit
        self._window = 2 * workers
        self._pool: ProcessPoolExecutor | None = None
        self._frame_slots: FrameSlots | None = None
        self.transport = "inline (no decode workers)"
        if workers > 0:
            slots_arg = None
            try:  # every sample in flight, the batch being filled, the batch the device may still be reading, a spare
                self._frame_slots = FrameSlots(self._window + 2 * config.output.batch_size + 1,
                                               slot_bytes_for(config, frame_bytes), device or torch.device("cpu"))
                slots_arg = (self._frame_slots.path, self._frame_slots.slot_bytes)
                self.transport = "shared memory" + (", page-locked" if self._frame_slots.pinned else "")
            except OSError as error:  # no memory for the slots: the frames travel pickled, slower
                self.transport = f"pickled through the worker pipes (shared memory failed: {error})"
            self._pool = ProcessPoolExecutor(workers, multiprocessing.get_context("spawn"), _init_worker,
                                             (config, stacks, slots_arg))
        self._device = device
        self._slots: deque[_Slot] = deque()
        self._feeding: Unit | None = None
        self._fed = 0
        self._exhausted = False
        self.wait_seconds = 0.0  # time the encoder spent waiting for decoded samples
        self.first_wait_seconds: float | None = None  # of it, for the first sample (workers starting)
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
            outcome, frame_slot = None, None
            if self._pool is not None:
                sample = unit.samples[position]
                frame_slot = self._frame_slots.acquire() if self._frame_slots is not None else None
                with child_signals_held():  # a submit may start a worker process
                    outcome = self._pool.submit(_decode_in_worker, sample, unit.probes[sample.source_index],
                                                frame_slot)
            self._slots.append(_Slot(unit, position, outcome, frame_slot))
            self._fed += 1

    def _settle(self) -> None:
        """Before the encoder blocks on a sample still being decoded, let the device finish what is queued: the
        wait counted is then time the device had nothing to do."""
        if self._device is not None:
            wait_for_device(self._device)

    def _pull(self) -> Decoded:
        slot = self._slots.popleft()
        self._top_up()  # refill before blocking, so workers keep going while this sample is encoded
        if slot.outcome is None:
            sample = slot.unit.samples[slot.position]
            decoded = decode_sample(sample, slot.unit.probes[sample.source_index], self.config)
            self.wait_seconds += decoded.seconds  # the encoder itself decoded: all of it is waiting
        else:
            if not slot.outcome.done():
                self._settle()
            started = time.perf_counter()
            decoded, layout = slot.outcome.result()
            self.wait_seconds += time.perf_counter() - started
            decoded = self._with_frames(decoded, slot.frame_slot, layout)
        if self.first_wait_seconds is None:
            self.first_wait_seconds = self.wait_seconds
        self.decode_seconds += decoded.seconds
        self.worker_cpu_seconds += decoded.cpu_seconds if slot.outcome is not None else 0.0
        return decoded

    def _with_frames(self, decoded: Decoded, frame_slot: int | None, layout: list[SlotArray] | None) -> Decoded:
        """Point the sample at its frames in the slot (released when the encoder calls decoded.release), or
        free the slot at once when the worker did not use it."""
        if frame_slot is None:
            return decoded
        slots = self._frame_slots
        if layout is None:
            slots.release(frame_slot)
            return decoded
        pixels = dataclasses.replace(decoded.result, modalities=slots.read(frame_slot, layout))
        return dataclasses.replace(decoded, result=pixels, release=lambda: slots.release(frame_slot))

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
        if self._frame_slots is not None:
            self._frame_slots.close()
            self._frame_slots = None

    def abort(self) -> None:
        """Stop now (a signal or an error): terminate the workers instead of waiting for their decodes."""
        if self._pool is not None:
            for pid in self.worker_pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
        self.close()
