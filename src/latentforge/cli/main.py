"""`latentforge` command line: one thin verb module per library function, and the one place where errors
become exit codes (docs/cli.md): 0 ok, 1 a failed check or data error, 2 usage or config, 128+N a signal."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import shlex
import signal
import sys
import threading
import warnings
from typing import Iterator

from ..errors import (
    ConfigError,
    DamagedFileWarning,
    ForcedWarning,
    HDF5WriteError,
    InputNotice,
    LatentforgeError,
    StopRequested,
    environment_message,
)
from ..version import __version__
from .common import say

# verb modules, each with add_parser(subparsers) and the run function it sets as the parser default
VERB_MODULES = ("build", "scan", "verify", "inspect", "query", "demo", "cosmos", "publish", "stats", "preview",
                "export")


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="latentforge", description="Turn raw video datasets into training-ready latent caches."
    )
    parser.add_argument("--version", action="version", version=f"latentforge {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    subparsers = parser.add_subparsers(dest="verb", required=True)
    for name in VERB_MODULES:
        importlib.import_module(f"latentforge.cli.{name}").add_parser(subparsers)
    return parser


def _quiet_model_loading() -> None:
    """transformers/huggingface progress bars and notices would bury our own progress and tables."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("DIFFUSERS_VERBOSITY", "error")


def _rerun_command() -> str:
    return shlex.join(["latentforge", *[a for a in sys.argv[1:] if a != "--overwrite"]])


def _os_error_line(error: OSError) -> str:
    """One line for an OSError nobody turned into a typed error: what failed, on which path."""
    known = environment_message(error)
    if known is not None:
        return known
    where = f"{error.filename}: " if error.filename else ""
    return f"{where}{error.strerror or error}"


@contextlib.contextmanager
def _warnings_as_lines() -> Iterator[None]:
    """Each DamagedFileWarning (a damaged build record set aside and rebuilt) and ForcedWarning (a check overridden
    with --force) as one `warning:` line on stderr, every time, and each InputNotice as one `note:` line; other
    warnings as Python shows them."""
    with warnings.catch_warnings():
        for category in (DamagedFileWarning, ForcedWarning, InputNotice):
            warnings.simplefilter("always", category)
        shown = warnings.showwarning

        def show(message, category, *rest, **named) -> None:  # noqa: ANN001 - warnings.showwarning's signature
            if issubclass(category, (DamagedFileWarning, ForcedWarning)):
                say(f"warning: {message}", stderr=True)
            elif issubclass(category, InputNotice):
                say(f"note: {message}", stderr=True)
            else:
                shown(message, category, *rest, **named)

        warnings.showwarning = show
        yield


def _leave_now(code: int) -> None:
    """Exit without running exit hooks: after a failed write the HDF5 library holds a broken file and can
    crash in its own exit hook, turning a clean message into a segfault."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C in a command, raised by _interrupt_on_sigint's handler. A subclass because CPython can mark a
    KeyboardInterrupt of exactly that class as unhandled although main() caught it (its C runners compare the
    class itself; seen when it landed in a dataclass being made during an import), and the interpreter then ends
    itself by SIGINT after the resume line: a parent saw -2 instead of 130 in 5 of 36 Ctrl-Cs during start-up,
    0 of 69 with this class."""


def _raise_interrupted(signum: int, frame: object) -> None:
    raise Interrupted


@contextlib.contextmanager
def _interrupt_on_sigint() -> Iterator[None]:
    """SIGINT raises Interrupted while a command runs from the main thread with Python's default handler in place
    (a build replaces it with its own stop while it holds the cache's lock); the handler is restored after."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    signal.signal(signal.SIGINT, _raise_interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def main(argv: list[str] | None = None) -> int:
    with _interrupt_on_sigint():
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    _quiet_model_loading()
    debug = False
    try:
        args = make_parser().parse_args(argv)  # imports every verb: a Ctrl-C may land here too
        debug = args.debug
        with _warnings_as_lines():
            return int(args.run(args) or 0)
    except (StopRequested, KeyboardInterrupt) as stop:
        return _stopped(stop)
    except Exception as error:
        stop = _interrupt_behind(error)
        if stop is not None:
            return _stopped(stop)
        if debug:
            raise
        return _report(error)


def _interrupt_behind(error: BaseException) -> StopRequested | KeyboardInterrupt | None:
    """The signal whose exception `error` was raised while handling, if any. A stop raised inside Python's own
    machinery (a lock, a thread join, an import) can make its clean-up fail with an error of its own, such as
    RuntimeError('release unlocked lock'): that is still the user's Ctrl-C, not a failure to report."""
    seen: set[int] = set()
    cause = error.__cause__ or error.__context__
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, (StopRequested, KeyboardInterrupt)):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def _stopped(stop: StopRequested | KeyboardInterrupt) -> int:
    if isinstance(stop, StopRequested):
        say(f"{stop}; staged work is kept. Resume with:\n  {_rerun_command()}", stderr=True)
        return stop.exit_code
    say(f"interrupted; rerun the same command to resume:\n  {_rerun_command()}", stderr=True)
    return 130


def _report(error: Exception) -> int:
    """The one error path of every verb: one line naming the value and the fix, and the exit code."""
    if isinstance(error, ConfigError):
        say(f"config error: {error}", stderr=True)
        return 2
    if isinstance(error, HDF5WriteError):
        say(f"error: {error}", stderr=True)
        _leave_now(1)
    if isinstance(error, LatentforgeError):
        say(f"error: {error}", stderr=True)
        return 1
    if isinstance(error, OSError):
        say(f"error: {_os_error_line(error)}", stderr=True)
        return 1
    say(f"error: unexpected {type(error).__name__}: {error}; rerun with `latentforge --debug ...` for the "
        "traceback and report it", stderr=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
