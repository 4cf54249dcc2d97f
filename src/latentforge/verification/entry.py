"""`latentforge verify ROOT`: the integrity checks, or with deep=True the deep verify on top of them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..cache.bucket_index import is_bucketed
from ..cache.check_report import VerifyReport
from ..cache.layout import BUCKETS_DIR
from ..errors import ConfigError
from ..progress import Progress
from ..sinks.dispatch import sink_for_root

if TYPE_CHECKING:  # the deep verify's modules import torch: loaded only when deep=True
    from .bucketed_deep import BucketedDeepReport
    from .deep import DeepReport
    from .quality import QualityThresholds
    from .reencode import Overrides


def verify(root: str | Path, *, deep: bool = False, require_complete: bool = True, spot: int | None = None,
           indices: list[int] | None = None, overrides: Overrides | None = None,
           thresholds: QualityThresholds | None = None, report_path: Path | None = None,
           progress: Progress | None = None) -> VerifyReport | DeepReport | BucketedDeepReport:
    """Is the cache at `root` intact (its own records, SHA256SUMS, shapes, NaN, padding), and with `deep`, does
    it hold what its sources, tokenizer and text encoder give (`spot` samples, default 4; `overrides` and
    `thresholds` default to Overrides() and QualityThresholds())? A bucketed root is checked as a whole and bucket by
    bucket; its deep verify spreads `spot` samples over each bucket. The report's `ok` is the verdict; `progress`
    (latentforge.progress) sees the integrity steps "sha256" and "rows", then the deep ones.
    The integrity checks are those of the sink the cache records (a WebDataset cache's work at an fsspec URL too);
    the deep verify reads HDF5 shards in a local folder."""
    sink, settled = sink_for_root(root)
    if not deep:
        return sink.verify(settled, require_complete, progress)
    root = sink.local_hdf5(settled, "verify --deep")  # deep verify re-encodes samples it reads from HDF5 shards
    from .bucketed_deep import verify_bucketed_deep
    from .deep import DEFAULT_SPOT, verify_deep
    from .quality import QualityThresholds
    from .reencode import Overrides

    spot = DEFAULT_SPOT if spot is None else spot
    overrides = Overrides() if overrides is None else overrides
    thresholds = QualityThresholds() if thresholds is None else thresholds
    if is_bucketed(root):
        if indices is not None:  # a dataset_index names a sample of one bucket's cache, not of the root
            raise ConfigError(f"{root} holds one cache per bucket, so --index is ambiguous; use --spot to check "
                              f"every bucket, or --index on one bucket: latentforge verify --deep "
                              f"{Path(root) / BUCKETS_DIR}/<bucket> --index I")
        return verify_bucketed_deep(Path(root), spot, overrides, thresholds, require_complete, report_path, progress)
    return verify_deep(Path(root), spot, overrides, thresholds, indices, require_complete, report_path, progress)
