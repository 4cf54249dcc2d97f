"""Which encoder made which units: the function (a digest of the tokenizer's fingerprint) and the environment
(device model and software) of every unit, grouped for cache_config.json's `encoded_by`.

Units of one cache must all come from the same function; several environments are allowed (a build resumed
on another machine) but mean the cache does not equal an uninterrupted build on either one, so verify warns.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from ..io import canonical_json


def function_digest(tokenizer_fingerprint: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of a tokenizer fingerprint: equal digests, same function."""
    return hashlib.sha256(canonical_json(tokenizer_fingerprint).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class EncodedBy:
    """The units (inclusive [first, last] ranges) one function in one environment encoded."""

    units: tuple[tuple[int, int], ...]
    function: str
    environment: dict[str, str]

    def unit_set(self) -> set[int]:
        return {unit for first, last in self.units for unit in range(first, last + 1)}

    def to_json(self) -> dict[str, Any]:
        return {"units": [list(r) for r in self.units], "function": self.function, "environment": self.environment}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EncodedBy:
        return cls(tuple((int(a), int(b)) for a, b in data["units"]), str(data["function"]),
                   {str(k): str(v) for k, v in data["environment"].items()})


def group_units(per_unit: dict[int, dict[str, Any]]) -> tuple[EncodedBy, ...]:
    """{unit: {"function", "environment"}} -> groups in order of their first unit, each with unit ranges."""
    groups: dict[str, tuple[str, dict[str, str], list[int]]] = {}
    for unit in sorted(per_unit):
        record = per_unit[unit]
        key = canonical_json(record)
        groups.setdefault(key, (record["function"], record["environment"], []))[2].append(unit)
    return tuple(EncodedBy(_ranges(units), function, environment) for function, environment, units in groups.values())


def _ranges(units: list[int]) -> tuple[tuple[int, int], ...]:
    ranges: list[list[int]] = []
    for unit in units:
        if ranges and unit == ranges[-1][1] + 1:
            ranges[-1][1] = unit
        else:
            ranges.append([unit, unit])
    return tuple((a, b) for a, b in ranges)
