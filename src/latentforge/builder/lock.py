"""An exclusive lock in ROOT/build/ so that two builds never write the same cache."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ..cache.layout import LOCK
from ..errors import LatentforgeError


class BuildLock:
    """fcntl lock on ROOT/build/lock; released by the kernel if the holder dies, so no stale locks."""

    def __init__(self, build_dir: Path):
        self.path = Path(build_dir) / LOCK
        self._fd: int | None = None

    def __enter__(self) -> "BuildLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise LatentforgeError(
                f"another build is running on this cache (lock {self.path} held by pid {holder}); "
                "wait for it to finish or stop it, then rerun"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
