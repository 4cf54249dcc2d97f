"""The last step of a bucketed build, once every bucket's cache is complete: the root's rejects, its index,
SHA256SUMS over everything, the root's checks, and only then the root's _CACHE_COMPLETE. Until that marker is
written the root is not complete, whichever buckets are."""

from __future__ import annotations

import time
from pathlib import Path

from ...cache.bucket_index import BucketIndex
from ...cache.check_report import CheckRecorder
from ...cache.checksums import write_bucketed_sha256sums
from ...cache.layout import COMPLETE_MARKER, PUBLISHED_MARKER, SUMS
from ...cache.rows import write_rejects
from ...errors import CacheIntegrityError
from ...io import canonical_json, write_text_atomic
from ...records import Reject
from ...testing.fault_points import fault_point
from .bucket_integrity import check_bucketed_root


def commit_bucketed_root(root: Path, index: BucketIndex, rejects: list[Reject]) -> None:
    """`rejects`: the samples no bucket took (plan and probe rejects, no_bucket), in rejects.jsonl order."""
    root = Path(root)
    for marker in (COMPLETE_MARKER, PUBLISHED_MARKER, SUMS):
        (root / marker).unlink(missing_ok=True)
    write_rejects(root, rejects)
    index.write(root)
    write_bucketed_sha256sums(root)
    fault_point("sha256sums")
    rec = CheckRecorder()
    check_bucketed_root(root, require_complete=False, rec=rec)
    if not rec.report.ok:
        failures = "; ".join(f"{c.name}: {c.detail}" for c in rec.report.failures[:10])
        raise CacheIntegrityError(f"{root}: the committed bucketed root fails its checks: {failures}")
    stamp = {"completed_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
             "num_samples": index.num_samples, "num_buckets": len(index.filled)}
    fault_point("marker")
    write_text_atomic(root / COMPLETE_MARKER, canonical_json(stamp) + "\n")
