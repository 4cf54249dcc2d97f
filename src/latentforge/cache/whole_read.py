"""Reading one whole cache while a build may be replacing it (cache/generation_swap.py).

A reader reads the folder a commit publishes: build/swap while a swap moves its files into the root, else the root.
Before and after the read it notes that folder and the identity of its complete-marker (a swap renames a new one in
last, and removes build/swap only after): when they differ the cache changed under the read, which is done again.
A read that agrees with both notes read files of one cache, the old one or the new one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TypeVar

from ..errors import CacheIntegrityError
from .generation_swap import swap_folder
from .layout import COMPLETE_MARKER

T = TypeVar("T")

PATIENCE_SECONDS = 60.0  # a swap moves files by rename; a cache changing for longer is being rebuilt over and over


@dataclass(frozen=True)
class _Published:
    folder: Path
    marker: tuple[int, int, int] | None  # inode, size and mtime of its complete-marker; None without one


def published_folder(root: Path) -> Path:
    """The folder holding the cache at `root` whole right now: build/swap during a swap, else the root."""
    swap = swap_folder(root)
    return swap if swap.is_dir() else Path(root)


def _published(root: Path) -> _Published:
    folder = published_folder(root)  # the swap folder first: it is removed only after the marker moved in
    try:
        found = (folder / COMPLETE_MARKER).stat()
    except OSError:
        return _Published(folder, None)
    return _Published(folder, (found.st_ino, found.st_size, found.st_mtime_ns))


def read_whole(root: Path, read: Callable[[Path], T]) -> T:
    """read(folder) of the cache at `root`, where `folder` is published_folder(root); read again while a build
    swapped the cache during the read, so what comes back was read from one whole cache."""
    deadline = time.monotonic() + PATIENCE_SECONDS
    while True:
        before = _published(Path(root))
        try:
            result = read(before.folder)
        except Exception:
            # a failure while the cache changed under the read says nothing about either cache
            if _published(Path(root)) == before or time.monotonic() > deadline:
                raise
            continue
        if _published(Path(root)) == before:
            return result
        if time.monotonic() > deadline:
            raise CacheIntegrityError(f"{root} changed during every read for {PATIENCE_SECONDS:g} s: a build keeps "
                                      "replacing it; read it once the build is done")
