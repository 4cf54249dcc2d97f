"""Every knob combination of one cuDNN engine for a convolution graph: the plans its heuristics do not list.

cuDNN's heuristics rank a few dozen (engine, knob values) configurations for a graph; the engine accepts many more
(tile size, tile K, cluster shape, ...). `knob_axes` turns the engine's knob ranges into the values to try, and
`knob_plans` creates, builds and times each combination through the frontend's `create_execution_plan`, skipping
the ones the engine refuses. Used by conv_kernels.py --knobs (GPU and the cudnn frontend only).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

# Knobs searched over fewer values than their full range: cluster shapes beyond these did not build on an H200,
# and the workspace and index modes change no tiling. The others are searched over their whole range when it has
# at most FULL_RANGE_LIMIT values, else over the values the heuristics' plans use (split-K buffer sizes).
DEFAULT_VALUES = {"TILE_CGA_M": (1, 2, 4, 8), "TILE_CGA_N": (1, 2, 3, 4), "WORKSPACE": (0,), "IDX_MODE": (0,)}
FULL_RANGE_LIMIT = 24


@dataclass(frozen=True)
class KnobAxis:
    knob: Any  # a cudnn.knob_type member (or any object whose str ends in the knob's name)
    values: tuple[int, ...]

    @property
    def name(self) -> str:
        return str(self.knob).rsplit(".", 1)[-1]


def knob_axes(knobs, seen: dict[str, set[int]], values: dict[str, tuple[int, ...]] | None = None) -> list[KnobAxis]:
    """The values to try per knob of an engine. `knobs`: the engine's knobs (`type`, `min_value`, `max_value`,
    `stride`); `seen`: knob name -> the values the heuristics' plans of this engine use; `values`: overrides."""
    chosen = {**DEFAULT_VALUES, **(values or {})}
    axes = []
    for knob in knobs:
        name = str(knob.type).rsplit(".", 1)[-1]
        whole = range(knob.min_value, knob.max_value + 1, knob.stride or 1)
        if name in chosen:
            picked = tuple(v for v in chosen[name] if v in whole)
        elif len(whole) <= FULL_RANGE_LIMIT:
            picked = tuple(whole)
        else:
            picked = tuple(sorted(seen.get(name, {knob.min_value})))
        axes.append(KnobAxis(knob.type, picked))
    return axes


def combinations(axes: list[KnobAxis]) -> Iterator[dict]:
    """Every combination of the axes' values, as the {knob: value} dict create_execution_plan takes."""
    for values in itertools.product(*(axis.values for axis in axes)):
        yield {axis.knob: value for axis, value in zip(axes, values)}


def seen_values(graph, engine: int) -> dict[str, set[int]]:
    """Knob name -> the values the graph's listed plans of this engine use."""
    seen: dict[str, set[int]] = {}
    for index in range(graph.get_execution_plan_count()):
        try:
            plan_engine, knobs = graph.get_engine_and_knobs_at_index(index)
        except Exception:  # noqa: BLE001 - a listed config the frontend cannot describe adds no values
            continue
        if plan_engine == engine:
            for knob, value in knobs.items():
                seen.setdefault(str(knob).rsplit(".", 1)[-1], set()).add(value)
    return seen


def knob_plans(graph, engine: int, listed: set[str], run_plan: Callable[[int, int], float],
               budget_s: float) -> tuple[list[dict], int]:
    """Create, build and time (`run_plan(index, reps)` -> seconds) every knob combination of `engine` on `graph`
    until `budget_s` runs out; rows for the combinations that built and ran, and how many were tried."""
    axes = knob_axes(graph.get_knobs_for_engine(engine), seen_values(graph, engine))
    rows, tried, started = [], 0, time.perf_counter()
    for knobs in combinations(axes):
        if time.perf_counter() - started > budget_s:
            break
        tried += 1
        try:
            graph.create_execution_plan(engine, knobs)
            index = graph.get_execution_plan_count() - 1
            name = graph.get_plan_name_at_index(index)
            seconds = run_plan(index, 2)
        except Exception:  # noqa: BLE001 - the engine refuses most combinations; they are not plans
            continue
        rows.append({"plan": name, "index": index, "seconds": seconds, "listed_by_heuristics": name in listed})
    return rows, tried
