"""What a backend's own key is for, declared where the key is (dataclass field metadata), so that resume and deep
verify treat every backend's keys alike without naming any of them.

Keys without a role define the function computed: a resumed build must have the same value, and deep verify
refuses a tokenizer that computes another function.
"""

from __future__ import annotations

import dataclasses
from typing import Any

ROLE = "role"
EXECUTION = "execution"  # changes memory use, speed or the code path (kernels), not the maths
LOCATION = "location"  # only says where files are looked up (a resumed build may move them)
PERMISSION = "permission"  # lets a machine run the same function (waives a check); a resume may change it
AUTOTUNES = "autotunes"  # an execution key which, when true, lets each process choose its kernels by timing


def option(default: Any, role: str, autotunes: bool = False) -> Any:
    """A field of a backend's options dataclass with its role."""
    return dataclasses.field(default=default, metadata={ROLE: role, AUTOTUNES: autotunes})


def keys_with_role(options: Any, *roles: str) -> frozenset[str]:
    """The keys of an options dataclass (class or instance) that have one of `roles`."""
    if not dataclasses.is_dataclass(options):
        return frozenset()
    return frozenset(f.name for f in dataclasses.fields(options) if f.metadata.get(ROLE) in roles)


def autotuning_keys(options: Any) -> frozenset[str]:
    """The keys which, when true, let each process choose its kernels by timing."""
    if not dataclasses.is_dataclass(options):
        return frozenset()
    return frozenset(f.name for f in dataclasses.fields(options) if f.metadata.get(AUTOTUNES))
