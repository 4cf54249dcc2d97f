"""Joining the Ray cluster for one part of a build (a pass before the units, or the units): run.ray_address, the
cluster this process is already connected to, or a one-machine Ray of the build's own (session.py); and SIGTERM or
SIGINT noted while Ray runs, so the Ray executor raises StopRequested between its Ray calls."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...config import BuildConfig
from ...errors import ConfigError, LatentforgeError
from ..lock_record import read_lock_record
from .session import start_own_ray


@dataclass(frozen=True)
class RayOptions:
    """The Ray executor's own keys (run.KEY)."""

    ray_address: str = ""  # auto | HOST:PORT; empty joins RAY_ADDRESS or starts a local Ray
    max_unit_tries: int = 3  # a unit whose worker fails this many times stops the build with its error


def ray_options(config: BuildConfig) -> RayOptions:
    """config's Ray keys; their defaults for a RunConfig made without them."""
    options = config.run.options
    return options if isinstance(options, RayOptions) else RayOptions()


def import_ray() -> Any:
    # The first worker line or error (a dead worker) the driver prints starts tqdm_ray's bar manager, which
    # replaces builtins.print for good unless this is 0: the process that ran the build kept a foreign print
    # (pickle.dumps(print) then fails). latentforge draws no tqdm_ray bars; an explicit setting still wins.
    os.environ.setdefault("RAY_TQDM_PATCH_PRINT", "0")
    try:
        import ray
    except ImportError:
        raise ConfigError("run.executor=ray needs Ray: pip install 'latentforge[ray]' on the driver and on every "
                          "node, or use run.executor=local") from None
    return ray


def on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@dataclass
class NotedSignal:
    signum: int | None = None


@contextlib.contextmanager
def signals_noted() -> Iterator[NotedSignal]:
    """SIGTERM/SIGINT only note the signal while Ray runs: an exception raised by a handler inside Ray's C
    code comes out as SystemError or is swallowed. The loop raises StopRequested (exit 143/130) itself.
    The handlers in place before are back afterwards."""
    noted = NotedSignal()
    if not on_main_thread():
        yield noted
        return

    def note(signum: int, frame: object) -> None:
        noted.signum = signum

    previous = {s: signal.signal(s, note) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield noted
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def joined(config: BuildConfig, build_dir: Path, quiet: bool) -> Iterator[tuple[Any, str, bool]]:
    """(ray, the build's lock token, whether this build started its own Ray) while connected: to the cluster
    this process is already connected to, or one joined (or started) here and left afterwards."""
    ray = import_ray()
    record = read_lock_record(build_dir)
    if record is None:
        raise LatentforgeError(f"{build_dir}/lock holds no lock record; run.executor=ray runs inside build()")
    connected_here = not ray.is_initialized()
    own_ray = connected_here and not ray_options(config).ray_address and not os.environ.get("RAY_ADDRESS")
    if connected_here:
        _connect(ray, config, build_dir, record.token, own_ray, quiet)
    try:
        yield ray, record.token, own_ray
    finally:
        if connected_here:
            ray.shutdown()


def _connect(ray: Any, config: BuildConfig, build_dir: Path, token: str, own_ray: bool, quiet: bool) -> None:
    """Join run.ray_address, or start a one-machine Ray of this build's own (session.py)."""
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)} if on_main_thread() else {}
    try:
        if own_ray:
            start_own_ray(ray, build_dir, token, log_to_driver=not quiet)
        else:
            ray.init(address=ray_options(config).ray_address or None, log_to_driver=not quiet)
    finally:
        for signum, handler in handlers.items():  # ray.init put its own in place (sys.exit, C++ abort)
            signal.signal(signum, handler)
