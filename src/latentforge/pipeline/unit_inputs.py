"""The units of work a plan is cut into, and each of their samples decoded for them (in a CPU worker or inline):
what executors place, and what they hand `run_unit` (pipeline/unit.py) one sample at a time, in plan order."""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable

from ..config import BuildConfig
from ..errors import SampleRejected
from ..records import Reject, Sample
from ..testing.fault_points import fault_point
from .probe import ProbeResult
from .sample import SamplePixels, load_sample_pixels


@dataclass(frozen=True)
class Unit:
    """A contiguous range of source_index values and what the probe found for each."""

    index: int
    samples: tuple[Sample, ...]
    probes: dict[int, ProbeResult | Reject]


def _nothing_held() -> None:
    pass


@dataclass(frozen=True)
class Decoded:
    """A sample's decode outcome as a decode worker returns it, with the worker's clocks."""

    source_index: int
    result: SamplePixels | Reject
    seconds: float  # wall seconds reading, decoding and transforming
    cpu_seconds: float  # CPU core-seconds the worker spent on it
    # Called once the frames have been encoded: they may live in a shared slot that then takes another sample.
    release: Callable[[], None] = field(default=_nothing_held, compare=False, repr=False)


def cut_units(samples: list[Sample], probes: dict[int, ProbeResult | Reject], unit_size: int,
              unit_of: dict[int, int] | None = None) -> list[Unit]:
    """Consecutive runs of unit_size samples, or, given `unit_of` ({source_index: unit}, an extended plan's
    numbering), the samples grouped by their unit."""
    if unit_of is None:
        unit_of = {s.source_index: position // unit_size for position, s in enumerate(samples)}
    chunks: dict[int, list[Sample]] = defaultdict(list)
    for sample in samples:
        chunks[unit_of[sample.source_index]].append(sample)
    return [Unit(index, tuple(chunk), {s.source_index: probes[s.source_index] for s in chunk})
            for index, chunk in sorted(chunks.items())]


def decode_sample(sample: Sample, probe: ProbeResult | Reject, config: BuildConfig) -> Decoded:
    """Decode and transform one sample (in a CPU worker or inline); a probe reject passes straight through."""
    if isinstance(probe, Reject):
        return Decoded(sample.source_index, probe, 0.0, 0.0)
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        result: SamplePixels | Reject = load_sample_pixels(sample, probe, config)
    except SampleRejected as error:
        result = Reject.of(sample, error, "decode")
    fault_point("decode")
    return Decoded(sample.source_index, result, time.perf_counter() - wall, time.process_time() - cpu)
