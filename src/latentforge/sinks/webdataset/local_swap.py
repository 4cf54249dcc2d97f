"""A WebDataset cache in a local folder is committed like an HDF5 cache (cache/generation_swap.py): the new cache
is written whole into ROOT/build/next, confirmed there, and swapped in by renames, so the folder never stops holding
a complete cache, and readers read build/swap meanwhile (cache/whole_read.py). A store URL has no rename: there the
commit replaces objects in place (sinks/webdataset/commit.py)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Callable, TypeVar

from ...cache.generation_swap import finish_swap, next_generation, swap_in
from ...cache.layout import COMPLETE_MARKER, RUN_RECORDS_DIR
from ...cache.whole_read import read_whole
from ...locations import is_url, local_folder
from ...transfer.digests import FileDigest
from ...transfer.stores import LocalDirRemote

T = TypeVar("T")


class NextGeneration(LocalDirRemote):
    """ROOT/build/next of a local root, as the store a commit writes to."""

    def __init__(self, root: LocalDirRemote):
        finish_swap(root.base)  # a swap a kill cut short: the root holds one whole cache again
        super().__init__(root.url, next_generation(root.base))
        self.published = root

    def link_published(self, rel: str, digest: FileDigest) -> bool:
        """Hard-link the root's `rel` into the new cache when it holds these bytes: the file stays as it is (bytes,
        inode and mtime) through the swap. False when the root has no such file, and for the complete-marker: each
        commit writes its own, whose identity tells readers the caches apart."""
        if rel == COMPLETE_MARKER or self.published.problem(rel, digest, deep=True) is not None:
            return False
        self._link(rel)
        return True

    def keep(self, rel: str, sha256: str, part_size: int) -> FileDigest:
        """Hard-link the root's `rel`, whose bytes the caller has vouched are `sha256`, into the new cache unread."""
        self._link(rel)
        # no slice digests: they serve S3's multipart checksums alone, which a local folder never asks for
        return FileDigest((self.base / rel).stat().st_size, sha256, part_size, ())

    def _link(self, rel: str) -> None:
        (self.base / rel).parent.mkdir(parents=True, exist_ok=True)
        os.link(self.published.base / rel, self.base / rel)

    def swap_in(self) -> None:
        """Make the confirmed new cache the root's; build/, which a WebDataset root keeps for the swap alone, goes."""
        swap_in(self.published.base)
        with contextlib.suppress(OSError):  # not empty: output.staging_dir put the build records there
            (self.published.base / RUN_RECORDS_DIR).rmdir()


def local_root(location: str) -> Path | None:
    """The folder of a root given as a path or a file:// URL; None for a store URL."""
    if is_url(location) and not location.startswith("file://"):
        return None
    return Path(local_folder(location, "the cache root"))


def read_whole_root(location: str, read: Callable[[str], T]) -> T:
    """read(location) of one whole cache: a local folder's through cache/whole_read.py (read(build/swap) while a
    commit swaps), a store URL's as it is."""
    folder = local_root(location)
    if folder is None:
        return read(location)
    return read_whole(folder, lambda published: read(str(published)))
