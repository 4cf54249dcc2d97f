"""Test-only fault injection: SIGKILL the whole build, or stall one process, at the n-th arrival at a phase.

`LATENTFORGE_FAULT=<phase>:<n>[:<action>]` acts at the n-th call of `fault_point(phase)` in each process.
Actions: `kill` (default) SIGKILLs the build's main process and then the current one, as a power cut would;
`sleep` says so on stderr and stalls the current process for STALL_SECONDS, so a test can signal a build
whose ranks and decode workers are busy (tests/executor/test_signals.py); `raise` raises InjectedFault there,
an error no code path expects (a bug's stand-in); `wait` writes `$LATENTFORGE_FAULT_RELEASE.waiting` and holds
the process until the file `$LATENTFORGE_FAULT_RELEASE` exists, so a test can change the world in between (fill
the disk) and let the build go on. Phases: decode, encode, stage, upload (a
staged unit sent to output.staging_url, before its sidecar), commit (after each shard of either sink), manifest,
sha256sums, marker, swap (after each file a commit into a local folder moves from build/swap into the root),
publish (before each object `latentforge publish` uploads or removes at a destination, each `_SUCCESS` included, and
before the local `_SUCCESS`) (docs/execution.md).
Without the variable `fault_point` is a dictionary lookup and nothing else, so it stays in production code paths.
"""

from __future__ import annotations

import os
import signal
import sys
import time

FAULT_ENV = "LATENTFORGE_FAULT"
MAIN_PID_ENV = "LATENTFORGE_FAULT_MAIN_PID"
RELEASE_ENV = "LATENTFORGE_FAULT_RELEASE"
PHASES = ("decode", "encode", "stage", "upload", "commit", "manifest", "sha256sums", "marker", "swap", "publish")
ACTIONS = ("kill", "sleep", "raise", "wait")
STALL_SECONDS = 600.0  # longer than any test waits; a forgotten stalled process still ends on its own

_arrivals: dict[str, int] = {}


class InjectedFault(RuntimeError):
    """Raised by `fault_point` under the `raise` action."""


def _target() -> tuple[str, int, str] | None:
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return None
    phase, _, rest = spec.partition(":")
    count, _, action = rest.partition(":")
    action = action or "kill"
    if phase not in PHASES or not count.isdigit() or int(count) < 1 or action not in ACTIONS:
        raise ValueError(f"{FAULT_ENV}={spec!r}; expected <phase>:<n>[:<action>] with phase one of "
                         f"{', '.join(PHASES)}, n >= 1, action one of {', '.join(ACTIONS)}")
    return phase, int(count), action


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
    if target[2] == "raise":
        raise InjectedFault(f"{FAULT_ENV}: injected at arrival {target[1]} at {phase}")
    if target[2] == "wait":
        release = os.environ[RELEASE_ENV]
        open(f"{release}.waiting", "w").close()
        deadline = time.monotonic() + STALL_SECONDS
        while not os.path.exists(release) and time.monotonic() < deadline:
            time.sleep(0.01)
        return
    if target[2] == "sleep":
        print(f"{FAULT_ENV}: process {os.getpid()} stalls at {phase} for {STALL_SECONDS:g} s", file=sys.stderr,
              flush=True)
        time.sleep(STALL_SECONDS)
        return
    main = int(os.environ.get(MAIN_PID_ENV) or os.getpid())  # "": this process is the one to kill
    if main != os.getpid():
        os.kill(main, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
