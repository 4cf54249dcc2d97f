"""What every process of a build does first: die with its parent, dump stacks on SIGUSR1, stop on SIGTERM.

PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, so children are only ever started
from a process's main thread (docs/execution.md).
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import os
import signal
import sys
from typing import Callable, Iterator

_PR_SET_PDEATHSIG = 1


class StopRequested(BaseException):
    """SIGTERM or SIGINT reached the main process; a BaseException so no `except Exception` swallows it."""

    def __init__(self, signum: int):
        self.signum = signum
        self.exit_code = 128 + signum
        super().__init__(f"stopped by {signal.Signals(signum).name}")


def die_with_parent() -> None:
    """SIGKILL this process when its parent dies, and exit at once if the parent is already gone."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    # The parent may have died between fork and prctl; then we were re-parented and must go now.
    if os.getppid() == 1:
        os._exit(1)


def dump_stacks_on_sigusr1(children: Callable[[], list[int]]) -> None:
    """SIGUSR1: this process's threads go to stderr (faulthandler, works even while stuck in C code), and
    the signal is forwarded to `children()` so one `kill -USR1 <main pid>` shows every process."""

    def forward(signum: int, frame: object) -> None:
        for pid in children():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGUSR1)

    signal.signal(signal.SIGUSR1, forward)
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True, chain=True)


def child_process_setup() -> None:
    """First thing in a spawned rank or decode worker. SIGINT is ignored: a terminal's Ctrl-C reaches the
    whole process group, and the main process decides how its children stop."""
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """In the main process: SIGTERM and SIGINT raise StopRequested (exit 143 / 130) wherever it is."""

    def stop(signum: int, frame: object) -> None:
        raise StopRequested(signum)

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
