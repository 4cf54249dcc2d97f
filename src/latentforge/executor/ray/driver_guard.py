"""A Ray worker stops writing the moment its build is no longer the one holding the lock.

Two checks, both before every staged write: the lock's token is still the one the driver gave the worker (a
build that took the lock after the driver died wrote a new one), and, where the driver started its own Ray
(every worker is on the driver's machine), the driver process is still alive. A watchdog thread also ends the
worker, and with it its decode children (PR_SET_PDEATHSIG), within a tenth of a second of the driver's death,
so a worker busy in a long encode does not wait for its next write to notice.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from ...errors import LatentforgeError
from ..lock_record import read_lock_record
from .session import start_ticks

_WATCH_SECONDS = 0.1
_EXIT_CODE = 70  # distinct in Ray's logs from a crash


@dataclass(frozen=True)
class DriverIdentity:
    token: str  # the driver's lock token
    pid: int
    ticks: int | None  # the driver's start time (clock ticks after boot), against pid reuse
    same_machine: bool  # the driver started its own Ray: its pid means something to the worker


class DriverGone(LatentforgeError):
    """The build this worker belongs to lost its driver or its lock; nothing more may be staged."""


def this_driver(token: str, same_machine: bool) -> DriverIdentity:
    return DriverIdentity(token, os.getpid(), start_ticks(os.getpid()), same_machine)


class DriverGuard:
    def __init__(self, build_dir: Path | str, driver: DriverIdentity, check_lock: bool = True):
        self.build_dir = Path(build_dir)
        self.driver = driver
        self.check_lock = check_lock  # False when units go to output.staging_url: the node may not see ROOT

    def driver_alive(self) -> bool:
        return not self.driver.same_machine or start_ticks(self.driver.pid) == self.driver.ticks

    def check(self) -> None:
        """Raise DriverGone when this worker's build no longer owns ROOT/build/lock."""
        if not self.driver_alive():
            raise DriverGone(f"the driver (pid {self.driver.pid}) of this build is gone; staging nothing more")
        if not self.check_lock:
            return
        record = read_lock_record(self.build_dir)
        if record is None or record.token != self.driver.token:
            holder = f"pid {record.pid} on {record.host}" if record else "nobody readable"
            raise DriverGone(f"{self.build_dir}/lock now belongs to {holder}, not to this worker's build; "
                             "staging nothing more")

    def watch(self) -> None:
        """Start the watchdog thread (only where the driver's pid can be seen from here)."""
        if self.driver.same_machine:
            threading.Thread(target=self._watch, name="latentforge-driver-watchdog", daemon=True).start()

    def _watch(self) -> None:
        stop = threading.Event()
        while not stop.wait(_WATCH_SECONDS):
            if not self.driver_alive():
                print(f"latentforge: driver pid {self.driver.pid} is gone; Ray worker {os.getpid()} exits",
                      file=sys.stderr, flush=True)
                os._exit(_EXIT_CODE)
