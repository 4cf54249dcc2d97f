"""The last step of a bucketed build, once every bucket's cache is complete: the root's rejects, its index,
SHA256SUMS over everything, the root's checks, and only then the root's _CACHE_COMPLETE. Until that marker is
written the root is not complete, whichever buckets are.

The root's new files are written into ROOT/build/next beside hard links to every file of its buckets, checked
there as a whole bucketed root, and swapped in (cache/generation_swap.py): a rerun never leaves the root without
its _CACHE_COMPLETE, and readers read build/swap meanwhile. A bucket that an `--extend` committed again waits,
complete, in its own build/next, so the old root stays whole until then; it is linked from there and moves into its
folder with the root's swap."""

from __future__ import annotations

import os
import time
from pathlib import Path

from ...cache.bucket_index import BucketIndex
from ...cache.check_report import CheckRecorder
from ...cache.checksums import write_bucketed_sha256sums
from ...cache.generation_swap import finish_swap, next_generation, swap_in, waiting_folder
from ...cache.layout import BUCKETS_DIR, COMPLETE_MARKER, RUN_RECORDS_DIR
from ...cache.rows import write_rejects
from ...errors import CacheIntegrityError
from ...io import canonical_json, fsync_dir, write_text_atomic
from ...records import Reject
from ...testing.fault_points import fault_point
from .bucket_integrity import check_bucketed_root


def commit_bucketed_root(root: Path, index: BucketIndex, rejects: list[Reject]) -> None:
    """`rejects`: the samples no bucket took (plan and probe rejects, no_bucket), in rejects.jsonl order."""
    root = Path(root)
    finish_swap(root)  # a swap a kill cut short: the root holds one whole cache again
    folder = next_generation(root, shards=False)
    _link_buckets(root, folder)
    write_rejects(folder, rejects)
    index.write(folder)
    write_bucketed_sha256sums(folder)
    fault_point("sha256sums")
    rec = CheckRecorder()
    check_bucketed_root(folder, require_complete=False, rec=rec)
    if not rec.report.ok:
        failures = "; ".join(f"{c.name}: {c.detail}" for c in rec.report.failures[:10])
        raise CacheIntegrityError(f"{root}: the committed bucketed root fails its checks: {failures}")
    stamp = {"completed_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
             "num_samples": index.num_samples, "num_buckets": len(index.filled)}
    fault_point("marker")
    write_text_atomic(folder / COMPLETE_MARKER, canonical_json(stamp) + "\n")
    swap_in(root)


def _link_buckets(root: Path, folder: Path) -> None:
    """Hard links in `folder` to every file of the root's buckets but their run records: the bucket caches as their
    commits left them (in the bucket's build/next when complete there), so `folder` is a whole bucketed root without
    a byte copied."""
    for bucket in sorted((root / BUCKETS_DIR).iterdir()) if (root / BUCKETS_DIR).is_dir() else ():
        source = waiting_folder(bucket)
        for dirpath, dirnames, filenames in os.walk(source):
            here = Path(dirpath)
            if here == source:  # a bucket's root: its build/ holds run records, not the cache
                dirnames[:] = [name for name in dirnames if name != RUN_RECORDS_DIR]
            target = folder / BUCKETS_DIR / bucket.name / here.relative_to(source)
            target.mkdir(parents=True, exist_ok=True)
            for name in filenames:
                os.link(here / name, target / name)
            fsync_dir(target)  # the links are in build/next before it is renamed build/swap
