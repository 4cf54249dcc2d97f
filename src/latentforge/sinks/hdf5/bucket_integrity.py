"""Integrity verify of a bucketed root: its index, markers, own files and SHA256SUMS, then every bucket's
cache with the single-cache checks (docs/verify.md). Check names of a bucket's checks start with its name."""

from __future__ import annotations

from pathlib import Path

from ...cache.bucket_index import BucketIndex
from ...cache.check_report import Check, CheckRecorder, VerifyReport
from ...cache.checksums import find_sum_problems
from ...cache.config_file import CacheConfig
from ...cache.layout import BUCKETED_ROOT_ENTRIES, BUCKETS_DIR, COMPLETE_MARKER, RUN_RECORDS_DIR
from ...errors import CacheIntegrityError
from ...progress import Progress
from .integrity import check_markers, check_rejects, verify_integrity


def _check_entries(root: Path, rec: CheckRecorder) -> None:
    for path in sorted(root.iterdir()):
        if path.name not in BUCKETED_ROOT_ENTRIES:
            rec.fail("root_layout", f"{path.name} does not belong in a bucketed root (docs/cache-format.md); move "
                     "it out of the cache")
    rec.close("root_layout", "the root holds only its index, rejects, sums, markers and buckets")


def _check_buckets(root: Path, index: BucketIndex, rec: CheckRecorder) -> None:
    """Every bucket with samples is a complete cache of the index's shape and count; nothing else is there but the
    build records of a bucket an `--extend` is filling (its cache moves in with the next index)."""
    listed = {entry.name for entry in index.filled}
    folder = root / BUCKETS_DIR
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        if path.name not in listed and (not path.is_dir() or {p.name for p in path.iterdir()} - {RUN_RECORDS_DIR}):
            rec.fail("buckets", f"{BUCKETS_DIR}/{path.name} is not a bucket of the index")
    for entry in index.filled:
        bucket_root = root / str(entry.path)
        if not (bucket_root / COMPLETE_MARKER).is_file():
            rec.fail("buckets", f"{entry.path} has no {COMPLETE_MARKER}: the bucket's cache was not completed")
            continue
        try:
            config = CacheConfig.load(bucket_root)
        except CacheIntegrityError as error:
            rec.fail("buckets", str(error))
            continue
        found = (config.num_samples, config.num_frames, config.height, config.width, tuple(config.latent.shape))
        expected = (entry.num_samples, entry.num_frames, entry.height, entry.width, entry.latent_shape)
        if found != expected:
            rec.fail("buckets", f"{entry.path}: (samples, frames, height, width, latent shape) {found} differ from "
                     f"the index's {expected}")
    rec.close("buckets", f"{len(index.filled)} bucket caches complete, as the index says")


def check_bucketed_root(root: Path, require_complete: bool, rec: CheckRecorder) -> BucketIndex | None:
    """The root's own checks (not the buckets' caches, nor SHA256SUMS); the index, or None when it is unusable."""
    check_markers(root, rec, require_complete)
    _check_entries(root, rec)
    try:
        index = BucketIndex.load(root)
    except CacheIntegrityError as error:
        rec.fail("bucket_index", str(error))
        return None
    rec.close("bucket_index", f"{len(index.buckets)} buckets, {index.num_samples} samples")
    _check_buckets(root, index, rec)
    check_rejects(root, set(), rec)
    return index


def verify_bucketed(root: Path, require_complete: bool = True, progress: Progress | None = None) -> VerifyReport:
    """The root's checks, its SHA256SUMS over every file, then each bucket's integrity verify."""
    root = Path(root)
    rec = CheckRecorder()
    index = check_bucketed_root(root, require_complete, rec)
    for problem in find_sum_problems(root, progress):
        rec.fail("sha256sums", str(problem))
    rec.close("sha256sums", "every file matches SHA256SUMS and every file is listed")
    report = rec.report
    for entry in index.filled if index is not None else []:
        if not (root / str(entry.path) / COMPLETE_MARKER).is_file():
            continue  # already failed under "buckets"
        inner = verify_integrity(root / str(entry.path), require_complete=True, progress=progress)
        report.checks += [Check(f"{entry.name}/{c.name}", c.ok, c.detail, c.dataset_index) for c in inner.checks]
        report.warnings += [Check(f"{entry.name}/{c.name}", c.ok, c.detail) for c in inner.warnings]
    return report
