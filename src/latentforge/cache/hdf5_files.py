"""A cache's HDF5 files opened and read for every reader (Datasets, preview, stats, export, deep verify, a commit
reading rows back): a file that does not open or read (cut short, overwritten, damaged on disk) is a DamagedFile
naming it and the fix, never the HDF5 library's bare OSError, which names no file."""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator

import h5py

from ..errors import DamagedFile

FIX = "`latentforge verify` on the cache lists every damaged file; rebuild the cache, or fetch it again"


def open_h5(path: os.PathLike[str] | str, **options: Any) -> h5py.File:
    """h5py.File(path, "r", **options), or DamagedFile."""
    with reading(path):
        return h5py.File(path, "r", **options)


@contextlib.contextmanager
def reading(path: os.PathLike[str] | str) -> Iterator[None]:
    """Reads of `path` inside the block: an OSError from the HDF5 library becomes DamagedFile naming `path`."""
    try:
        yield
    except OSError as error:
        raise DamagedFile(path, str(error), FIX) from None
