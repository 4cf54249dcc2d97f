"""A commit replaces a whole cache at once: a reader finds a complete cache, the old one or the new one, at every
moment, and a kill at any point leaves one of them.

The commit writes the new cache whole into ROOT/build/next (files whose bytes stay are hard links to the root's),
verifies it there, and renames the folder build/swap: from then on readers read it (cache/whole_read.py). Its files
then move into the root by rename only (a hard link to a tmp sibling, renamed over the old name), the shards first
and the complete-marker last; the old cache's files the new one lacks go (its _SUCCESS among them, which vouched for
a published copy of the old one alone), and build/swap is renamed build/retired and removed. Every step can be done
again, so a build that finds build/swap, left by a kill, finishes it before it writes anything.

The same swap serves every local cache: an HDF5 cache, a WebDataset cache in a local folder (shards/ of tars), and
a bucketed root, whose new generation holds no shards/ but links to every file of its buckets: the links make
build/swap a whole bucketed root for readers. A bucket committed and swapped before the root (a build's) is in place
already; one whose commit an `--extend` left in the bucket's build/next, so that the old root stayed whole, moves
into its folder through the bucket's own swap first (its readers find it whole too), before the root's own files.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..io import atomic_path, fsync_dir
from ..testing.fault_points import fault_point
from .layout import (
    BUCKETS_DIR,
    COMPLETE_MARKER,
    NEXT_GENERATION,
    RETIRED_GENERATION,
    RUN_RECORDS_DIR,
    SHARDS_DIR,
    SUMS,
    SWAP_GENERATION,
)


def swap_folder(root: Path) -> Path:
    return Path(root) / RUN_RECORDS_DIR / SWAP_GENERATION


def next_generation(root: Path, shards: bool = True) -> Path:
    """An empty ROOT/build/next (with its shards/ folder unless `shards` is False: a bucketed root), for the commit
    to write the new cache into; whatever a killed commit left there, or in build/retired, is removed first."""
    records = Path(root) / RUN_RECORDS_DIR
    for name in (NEXT_GENERATION, RETIRED_GENERATION):
        shutil.rmtree(records / name, ignore_errors=True)
    folder = records / NEXT_GENERATION
    folder.mkdir(parents=True)
    if shards:
        (folder / SHARDS_DIR).mkdir()
    return folder


def waiting_folder(root: Path) -> Path:
    """Where the cache at `root` is as its last commit left it: its build/next when the commit left it there,
    complete, to move in with its bucketed root (a bucket an `--extend` grows), else `root`."""
    folder = Path(root) / RUN_RECORDS_DIR / NEXT_GENERATION
    return folder if (folder / COMPLETE_MARKER).is_file() else Path(root)


def swap_in(root: Path) -> None:
    """Make the complete, verified cache in build/next the one at `root`."""
    records = Path(root) / RUN_RECORDS_DIR
    if (records / NEXT_GENERATION / SHARDS_DIR).is_dir():
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
    for bucket in sorted((swap / BUCKETS_DIR).iterdir()) if (swap / BUCKETS_DIR).is_dir() else ():
        _move_bucket_in(bucket, root / BUCKETS_DIR / bucket.name)
    has_shards = (swap / SHARDS_DIR).is_dir()
    new_shards = sorted(path.name for path in (swap / SHARDS_DIR).iterdir()) if has_shards else []
    if has_shards:
        (root / SHARDS_DIR).mkdir(exist_ok=True)
    for name in new_shards:
        _move_in(swap / SHARDS_DIR / name, root / SHARDS_DIR / name)
        fault_point("swap")  # test-only: a kill between two moves
    files = {path.name for path in swap.iterdir() if path.is_file()}
    for old in sorted(root.iterdir()):  # the old cache's files at the top that the new one lacks
        if old.name not in files and old.is_file():
            old.unlink()
    # the sums and the marker last: whoever reads the root alone (sha256sum -c, a shell check) finds them vouching
    # for files that are all in place
    for name in sorted(files - {SUMS, COMPLETE_MARKER}) + [SUMS, COMPLETE_MARKER]:
        if name in files:
            _move_in(swap / name, root / name)
            fault_point("swap")
    for stale in (root / SHARDS_DIR).iterdir() if has_shards else ():  # the old cache's other shards, tmp leftovers
        if stale.name not in new_shards and stale.is_file():
            stale.unlink()
    retired = root / RUN_RECORDS_DIR / RETIRED_GENERATION
    shutil.rmtree(retired, ignore_errors=True)
    os.rename(swap, retired)
    fsync_dir(retired.parent)
    shutil.rmtree(retired, ignore_errors=True)
    return True


def _cache_files(folder: Path) -> list[str]:
    """Relative paths of a bucket's cache files: all but its build records."""
    found = []
    for dirpath, dirnames, filenames in os.walk(folder):
        here = Path(dirpath)
        if here == folder:
            dirnames[:] = [name for name in dirnames if name != RUN_RECORDS_DIR]
        found += [(here / name).relative_to(folder).as_posix() for name in filenames]
    return sorted(found)


def _move_bucket_in(new: Path, bucket_root: Path) -> None:
    """A bucketed root's swap: the bucket's files as its new generation links them (`new`) become the bucket's, by
    the bucket's own swap, unless they are its files already."""
    finish_swap(bucket_root)  # one a kill cut short
    files = _cache_files(new)
    if bucket_root.is_dir() and _cache_files(bucket_root) == files and \
            all(os.path.samefile(new / rel, bucket_root / rel) for rel in files):
        return
    folder = next_generation(bucket_root)
    for rel in files:
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        os.link(new / rel, folder / rel)
    swap_in(bucket_root)


def _move_in(source: Path, final: Path) -> None:
    """`final` becomes `source`'s file by one rename; `source` stays, so the swap folder stays whole."""
    if final.exists() and os.path.samefile(source, final):
        return
    with atomic_path(final) as tmp:
        tmp.unlink(missing_ok=True)  # what a killed swap left
        os.link(source, tmp)
