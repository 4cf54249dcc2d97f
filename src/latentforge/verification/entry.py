"""`latentforge verify ROOT`: the integrity checks, or with deep=True the deep verify on top of them."""

from __future__ import annotations

from pathlib import Path

from .. import registry
from ..cache.bucket_index import is_bucketed
from ..cache.bucket_integrity import verify_bucketed
from ..cache.check_report import VerifyReport
from ..cache.integrity import verify_integrity
from ..cache.layout import BUCKETS_DIR
from ..cache.root_kind import HDF5, refuse_url, root_sink
from ..errors import ConfigError
from ..reporting import Progress
from .bucketed_deep import BucketedDeepReport, verify_bucketed_deep
from .deep import DEFAULT_SPOT, DeepReport, verify_deep
from .quality import QualityThresholds
from .reencode import Overrides


def verify(root: str | Path, *, deep: bool = False, require_complete: bool = True, spot: int = DEFAULT_SPOT,
           indices: list[int] | None = None, overrides: Overrides = Overrides(),
           thresholds: QualityThresholds = QualityThresholds(), report_path: Path | None = None,
           progress: Progress | None = None) -> VerifyReport | DeepReport | BucketedDeepReport:
    """Is the cache at `root` intact (its own records, SHA256SUMS, shapes, NaN, padding), and with `deep`, does
    it hold what its sources, tokenizer and text encoder give? A bucketed root is checked as a whole and bucket by
    bucket; its deep verify spreads `spot` samples over each bucket. The report's `ok` is the verdict; `progress`
    (latentforge.reporting) sees the integrity steps "sha256" and "rows", then the deep ones.
    A WebDataset cache (a local folder or an fsspec URL) gets the integrity checks of its sink."""
    sink = root_sink(root)
    if sink not in (None, HDF5):
        if deep:
            raise ConfigError(f"{root} is a {sink} cache, but --deep re-encodes samples it reads from HDF5 shards; "
                              f"verify it without --deep, or build the same config with output.sink=hdf5 and "
                              "verify that one with --deep")
        return registry.resolve("sink", sink).verify(str(root), require_complete, progress)
    refuse_url(root, "verify")
    if is_bucketed(Path(root)):
        if not deep:
            return verify_bucketed(Path(root), require_complete, progress)
        if indices is not None:  # a dataset_index names a sample of one bucket's cache, not of the root
            raise ConfigError(f"{root} holds one cache per bucket, so --index is ambiguous; use --spot to check "
                              f"every bucket, or --index on one bucket: latentforge verify --deep "
                              f"{Path(root) / BUCKETS_DIR}/<bucket> --index I")
        return verify_bucketed_deep(Path(root), spot, overrides, thresholds, require_complete, report_path, progress)
    if not deep:
        return verify_integrity(Path(root), require_complete, progress)
    return verify_deep(Path(root), spot, overrides, thresholds, indices, require_complete, report_path, progress)
