"""The webdataset sink: tar shards committed straight to output.root, a local folder or an fsspec URL."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from ..cache.check_report import VerifyReport
from ..config.schema import OutputConfig
from ..reporting import Progress
from ..transfer.destinations import Destination
from ..writers.commit import ordered_rejects
from ..writers.sink import SinkCommit, StagedCache
from ..writers.staging import read_staged_rejects
from .commit import WebDatasetOptions, commit_webdataset
from .verify import verify_webdataset

TARS_DIR = "tars"  # under the build records: the one tar being written and uploaded


class WebDatasetSink:
    remote_root = True

    @staticmethod
    def commit(output: OutputConfig, build_dir: Path, staged: StagedCache) -> SinkCommit:
        # Credentials and endpoint come from the environment (AWS_* for s3://), as fsspec reads them.
        result = commit_webdataset(Destination(output.root), staged.unit_paths, staged.plan_rejects,
                                   staged.cache_config, staged.empty_prompt,
                                   WebDatasetOptions(build_dir / TARS_DIR, shard_bytes=output.shard_bytes),
                                   staged.planned, staged.allow_empty)
        unit_rejects = [r for path in staged.unit_paths for r in read_staged_rejects(path)]
        rejects = ordered_rejects(staged.plan_rejects, unit_rejects)
        return SinkCommit(result.num_samples, dict(sorted(Counter(r.reason for r in rejects).items())))

    @staticmethod
    def verify(root: str, require_complete: bool, progress: Progress | None) -> VerifyReport:
        """The integrity checks of a WebDataset cache at a folder or an fsspec URL (streaming/verify.py)."""
        return verify_webdataset(root, require_complete, progress)
