"""A commit replaces a whole cache at once: a reader finds a complete cache, the old one or the new one, at every
moment, and a kill at any point leaves one of them.

The commit writes the new cache whole into ROOT/build/next (shards whose bytes stay are hard links to the root's),
verifies it there, and renames the folder build/swap: from then on readers read it (cache/whole_read.py). Its files
then move into the root by rename only (a hard link to a tmp sibling, renamed over the old name), the shards first
and the complete-marker last; the old cache's files the new one lacks go (its _SUCCESS among them, which vouched for
a published copy of the old one alone), and build/swap is renamed build/retired and removed. Every step can be done
again, so a build that finds build/swap, left by a kill, finishes it before it writes anything.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..io import atomic_path, fsync_dir
from ..testing.fault_points import fault_point
from .layout import (
    COMPLETE_MARKER,
    NEXT_GENERATION,
    RETIRED_GENERATION,
    ROOT_ENTRIES,
    RUN_RECORDS_DIR,
    SHARDS_DIR,
    SUMS,
    SWAP_GENERATION,
)

# The root's files a swap replaces or removes; shards/ and build/ are folders, moved file by file or left alone.
_SWAPPED_FILES = ROOT_ENTRIES - {SHARDS_DIR, RUN_RECORDS_DIR}


def swap_folder(root: Path) -> Path:
    return Path(root) / RUN_RECORDS_DIR / SWAP_GENERATION


def next_generation(root: Path) -> Path:
    """An empty ROOT/build/next with its shards/ folder, for the commit to write the new cache into; whatever a
    killed commit left there, or in build/retired, is removed first."""
    records = Path(root) / RUN_RECORDS_DIR
    for name in (NEXT_GENERATION, RETIRED_GENERATION):
        shutil.rmtree(records / name, ignore_errors=True)
    folder = records / NEXT_GENERATION
    (folder / SHARDS_DIR).mkdir(parents=True)
    return folder


def swap_in(root: Path) -> None:
    """Make the complete, verified cache in build/next the one at `root`."""
    records = Path(root) / RUN_RECORDS_DIR
    fsync_dir(records / NEXT_GENERATION / SHARDS_DIR)  # the hard links made there
    fsync_dir(records / NEXT_GENERATION)
    os.rename(records / NEXT_GENERATION, records / SWAP_GENERATION)
    fsync_dir(records)
    finish_swap(root)


def finish_swap(root: Path) -> bool:
    """Move build/swap's files into the root and retire it; False when there is no swap to finish."""
    root = Path(root)
    swap = swap_folder(root)
    if not swap.is_dir():
        return False
    new_shards = sorted(path.name for path in (swap / SHARDS_DIR).iterdir())
    (root / SHARDS_DIR).mkdir(exist_ok=True)
    for name in new_shards:
        _move_in(swap / SHARDS_DIR / name, root / SHARDS_DIR / name)
        fault_point("swap")  # test-only: a kill between two moves
    files = {path.name for path in swap.iterdir() if path.is_file()}
    for name in sorted(_SWAPPED_FILES - files):
        (root / name).unlink(missing_ok=True)
    # the sums and the marker last: whoever reads the root alone (sha256sum -c, a shell check) finds them vouching
    # for files that are all in place
    for name in sorted(files - {SUMS, COMPLETE_MARKER}) + [SUMS, COMPLETE_MARKER]:
        if name in files:
            _move_in(swap / name, root / name)
            fault_point("swap")
    for stale in (root / SHARDS_DIR).iterdir():  # the old cache's other shards, and tmp leftovers
        if stale.name not in new_shards and stale.is_file():
            stale.unlink()
    retired = root / RUN_RECORDS_DIR / RETIRED_GENERATION
    shutil.rmtree(retired, ignore_errors=True)
    os.rename(swap, retired)
    fsync_dir(retired.parent)
    shutil.rmtree(retired, ignore_errors=True)
    return True


def _move_in(source: Path, final: Path) -> None:
    """`final` becomes `source`'s file by one rename; `source` stays, so the swap folder stays whole."""
    if final.exists() and os.path.samefile(source, final):
        return
    with atomic_path(final) as tmp:
        tmp.unlink(missing_ok=True)  # what a killed swap left
        os.link(source, tmp)
