"""An exclusive lock in ROOT/build/ so that two builds never write the same cache, and no process of a build
that died still writes after the next one holds it.

The lock file records its holder (pid, host, a fresh token). The kernel releases the fcntl lock the moment the
holder dies, but a Ray build's workers may outlive their driver by seconds; so whoever takes the lock next
first kills, on this machine, every process of the previous holder's build (found by its token, and the Ray
daemons it recorded: executor/ray/session.py) and waits until they are gone. Only then is the new record
written, and Ray workers compare the record's token with their own before each staged write.
"""

from __future__ import annotations

import fcntl
import os
import socket
import uuid
from pathlib import Path

from ..cache.layout import LOCK
from ..errors import LatentforgeError
from ..executor.lock_record import LockRecord
from ..executor.ray.session import reap_build


class BuildLock:
    """fcntl lock on ROOT/build/lock; released by the kernel if the holder dies, so no stale locks."""

    def __init__(self, build_dir: Path):
        self.build_dir = Path(build_dir)
        self.path = self.build_dir / LOCK
        self.record: LockRecord | None = None
        self._fd: int | None = None

    def __enter__(self) -> "BuildLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 4096, 0).decode(errors="replace").strip()
            os.close(fd)
            holder = LockRecord.parse(text)
            who = f"pid {holder.pid} on {holder.host}" if holder else f"pid {text or 'unknown'}"
            raise LatentforgeError(f"another build is running on this cache (lock {self.path} held by {who}); "
                                   "wait for it to finish or stop it, then rerun") from None
        try:
            previous = LockRecord.parse(os.pread(fd, 4096, 0).decode(errors="replace"))
            if previous is not None and previous.host == socket.gethostname():
                reap_build(self.build_dir, previous.token)
        except BaseException:
            os.close(fd)  # closing releases the flock
            raise
        self.record = LockRecord(os.getpid(), socket.gethostname(), uuid.uuid4().hex)
        os.ftruncate(fd, 0)
        os.pwrite(fd, self.record.to_text().encode(), 0)
        os.fsync(fd)
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
