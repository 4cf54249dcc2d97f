"""What every process of a build does first: die with its parent, dump stacks on SIGUSR1, stop on SIGTERM.

PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, so children are only ever started
from a process's main thread (docs/execution.md).

SIGUSR1 stack dumps: the main process writes its own to stderr; every rank and decode worker writes to its
own file ROOT/build/stacks/<role>-<pid>.txt, because faulthandler writes a byte at a time and dumps of
processes signalled together would interleave into one unreadable stream.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import multiprocessing
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Callable, Iterator, TextIO

from ..cache.layout import STACKS_DIR
from ..errors import StopRequested

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """SIGKILL this process when its parent dies, and exit at once if the parent is already gone."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    # The parent may have died between fork and prctl; then we were re-parented (to init or to a subreaper,
    # so not necessarily pid 1) and must go now.
    parent = multiprocessing.parent_process()
    if os.getppid() == 1 or (parent is not None and os.getppid() != parent.pid):
        os._exit(1)


HELD_FOR_CHILDREN = {signal.SIGUSR1, signal.SIGINT}


DEFERRED_WHILE_STARTING = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def child_signals_held() -> Iterator[None]:
    """Start children inside this: they inherit SIGUSR1 and SIGINT blocked (the mask survives exec). SIGUSR1
    stays held until dump_stacks_on_sigusr1 has set their handler, so one forwarded during their start-up does
    not kill them by the default action; SIGINT until child_process_setup ignores it, so a terminal's Ctrl-C
    that reaches the whole process group while a child still imports torch does not print its traceback.
    The mask holds signals for this thread only: one delivered to another thread of the process would still run
    its Python handler here, between the child's spawn and the start-up data sent to it (the child then dies of
    EOFError, traceback and all). So the stop handlers are deferred too, and run as soon as the start is done."""
    arrived: list[int] = []
    saved = {signum: signal.getsignal(signum) for signum in DEFERRED_WHILE_STARTING}
    for signum, handler in saved.items():
        if callable(handler):
            signal.signal(signum, lambda received, frame: arrived.append(received))
    signal.pthread_sigmask(signal.SIG_BLOCK, HELD_FOR_CHILDREN)
    try:
        yield
    finally:
        for signum, handler in saved.items():
            if callable(handler):
                signal.signal(signum, handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD_FOR_CHILDREN)
        for signum in dict.fromkeys(arrived):
            signal.raise_signal(signum)


def stacks_file(build_dir: str | Path, role: str) -> TextIO | None:
    """This process's SIGUSR1 dump file, ROOT/build/stacks/<role>-<pid>.txt (kept open: faulthandler writes
    to its descriptor from the signal handler). None when it cannot be made: a diagnosis aid must not stop a
    build, the dump then goes to stderr."""
    folder = Path(build_dir) / STACKS_DIR
    try:
        folder.mkdir(parents=True, exist_ok=True)
        return open(folder / f"{role}-{os.getpid()}.txt", "a", encoding="utf-8")
    except OSError:
        return None


def remove_empty_stack_files(build_dir: str | Path) -> None:
    """Every process opens its dump file at start; only the ones that received a SIGUSR1 are worth keeping.
    Runs while the build is ending, maybe on a failing disk: errors are ignored."""
    folder = Path(build_dir) / STACKS_DIR
    with contextlib.suppress(OSError):
        for path in folder.iterdir():
            if path.is_file() and path.stat().st_size == 0:
                path.unlink()
        if not any(folder.iterdir()):
            folder.rmdir()


def dump_stacks_on_sigusr1(children: Callable[[], list[int]], file: TextIO | None = None,
                           note: str | None = None) -> None:
    """SIGUSR1: this process's threads go to `file` (stderr by default; faulthandler, so it works even while
    stuck in C code), then `note` (where the children's dumps go) is printed to stderr and the signal is forwarded to
    `children()`, so one `kill -USR1 <main pid>` reaches every process. Calling it again
    replaces the children and the file. Only the main thread may set signal handlers: elsewhere (a build
    run from a library thread) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        return

    def forward(signum: int, frame: object) -> None:
        pids = children()
        if note and pids:  # before forwarding: a reader who sees the children's dumps has the note already
            print(note, file=sys.stderr, flush=True)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGUSR1)

    # faulthandler keeps its first registration's sigaction; unregister so the dump is installed again on top
    # of the new forwarder instead of being replaced by it.
    faulthandler.unregister(signal.SIGUSR1)
    signal.signal(signal.SIGUSR1, forward)
    faulthandler.register(signal.SIGUSR1, file=file or sys.stderr, all_threads=True, chain=True)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})  # deliver what child_signals_held kept pending


def child_process_setup() -> None:
    """First thing in a spawned rank or decode worker. SIGINT is ignored: a terminal's Ctrl-C reaches the
    whole process group, and the main process decides how its children stop."""
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # held by child_signals_held; now ignored
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """In the main process, for the whole build: SIGTERM and SIGINT raise StopRequested (exit 143 / 130)
    wherever it is, and SIGUSR1 dumps its stacks from the start (the executor adds its children later)."""

    def stop(signum: int, frame: object) -> None:
        raise StopRequested(signum)

    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)}
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    dump_stacks_on_sigusr1(lambda: [])
    try:
        yield
    finally:
        faulthandler.unregister(signal.SIGUSR1)
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
