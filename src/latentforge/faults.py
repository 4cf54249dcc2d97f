"""Test-only fault injection: SIGKILL the whole build at the n-th arrival at a named phase.

`LATENTFORGE_FAULT=<phase>:<n>` (for example `stage:2`) makes the n-th call of `fault_point(phase)` in one
process kill the build's main process and then itself with SIGKILL, as a power cut would. Phases:
decode, encode, stage, commit, manifest, sha256sums, marker (docs/execution.md). Without the variable
`fault_point` is a dictionary lookup and nothing else, so it stays in production code paths.
"""

from __future__ import annotations

import os
import signal

FAULT_ENV = "LATENTFORGE_FAULT"
MAIN_PID_ENV = "LATENTFORGE_FAULT_MAIN_PID"
PHASES = ("decode", "encode", "stage", "commit", "manifest", "sha256sums", "marker")

_arrivals: dict[str, int] = {}


def _target() -> tuple[str, int] | None:
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return None
    phase, _, count = spec.partition(":")
    if phase not in PHASES or not count.isdigit() or int(count) < 1:
        raise ValueError(f"{FAULT_ENV}={spec!r}; expected <phase>:<n> with phase one of {', '.join(PHASES)}, n >= 1")
    return phase, int(count)


def arm_main_process() -> None:
    """Called once by the build's main process, so faults in spawned children can take it down too."""
    if _target() is not None:
        os.environ.setdefault(MAIN_PID_ENV, str(os.getpid()))


def fault_point(phase: str) -> None:
    target = _target()
    if target is None or target[0] != phase:
        return
    _arrivals[phase] = _arrivals.get(phase, 0) + 1
    if _arrivals[phase] != target[1]:
        return
    main = int(os.environ.get(MAIN_PID_ENV, os.getpid()))
    if main != os.getpid():
        os.kill(main, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
