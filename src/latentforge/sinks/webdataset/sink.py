"""The webdataset sink: tar shards committed straight to output.root, a local folder or an fsspec URL, and read
back from there (verify, inspect, StreamingLatentDataset) without a download."""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...cache.check_report import VerifyReport
from ...cache.layout import (
    CACHE_CONFIG,
    COMPLETE_MARKER,
    MANIFEST,
    PUBLISHED_MARKER,
    README,
    REJECTS,
    RUN_RECORDS_DIR,
    SHARDS_DIR,
    SUMS,
)
from ...cache.ownership import RootLayout
from ...cache.root import CacheRoot
from ...cache.summary import CacheSummary
from ...config.schema import OutputConfig
from ...errors import ConfigError
from ...locations import is_url
from ...progress import Progress
from ...staging.gather import ordered_rejects
from ...staging.staged_units import read_staged_rejects
from ...transfer.destinations import Destination
from ..base import Sink, SinkCommit, StagedCache
from .commit import WebDatasetOptions, commit_webdataset
from .layout import EMPTY_PROMPT_TAR, READER_INDEX_DIR, SINK, TAR_INDEX_SUFFIX, is_tar_shard_name
from .local_swap import local_root, read_whole_root

if TYPE_CHECKING:
    from ...config.schema import BuildConfig

TARS_DIR = "tars"  # under the build records: the one tar being written and uploaded

_INSTEAD = {
    "query": f"its rows are in {MANIFEST} (JSON lines), which duckdb's read_json or jq filter",
    "export": "it is already a training format: stream it with latentforge.StreamingLatentDataset, or "
              "build the same config with output.sink=hdf5 to export it",
    "verify --deep": "verify it without --deep, or build the same config with output.sink=hdf5 and verify that one "
                     "with --deep",
}


@dataclass(frozen=True)
class WebDatasetSinkOptions:
    """The webdataset sink's own keys (output.KEY)."""

    shard_bytes: int = 512 << 20  # a tar shard is closed once its samples' arrays reach this size


def sink_options(output: OutputConfig) -> WebDatasetSinkOptions:
    """output's webdataset keys; their defaults for an OutputConfig made without them."""
    return output.options if isinstance(output.options, WebDatasetSinkOptions) else WebDatasetSinkOptions()


class WebDatasetSink(Sink):
    name = SINK
    remote_root = True
    root_layout = RootLayout(
        frozenset({CACHE_CONFIG, MANIFEST, REJECTS, EMPTY_PROMPT_TAR, README, SUMS, COMPLETE_MARKER, PUBLISHED_MARKER,
                   SHARDS_DIR, READER_INDEX_DIR, RUN_RECORDS_DIR}),  # build/: a local root's commit, swapped in
        lambda name: is_tar_shard_name(name.removesuffix(TAR_INDEX_SUFFIX)),
        opaque=frozenset({READER_INDEX_DIR, RUN_RECORDS_DIR}))
    options_class = WebDatasetSinkOptions

    @classmethod
    def check_config(cls, config: BuildConfig) -> None:
        output = config.output
        if sink_options(output).shard_bytes < 1:
            raise ConfigError(f"output.shard_bytes={sink_options(output).shard_bytes} must be >= 1")
        if config.frames.buckets:
            raise ConfigError(f"output.sink={output.sink!r} writes one cache, but frames.buckets gives several; "
                              "build each bucket shape as its own cache, or use output.sink=hdf5 for a bucketed root")
        if output.staging_dir and is_url(output.staging_dir):
            raise ConfigError(f"output.staging_dir={output.staging_dir!r} is a URL; give a node-local folder (the "
                              "build records and staged units live there), or leave it empty for one under the "
                              "system temp dir; to stage units in object storage, set output.staging_url")

    @classmethod
    def extend_refusal(cls, output: OutputConfig) -> str | None:
        if local_root(output.root) is not None:
            return None  # committed by a swap that keeps the tars whose samples stay (shard_layout.py)
        return (f"--extend grows a WebDataset cache in a local folder, but output.root={output.root!r} is a store URL, "
                "where the commit would replace the objects in place: readers would find no complete cache while it "
                "runs, and a kill could leave old samples only in objects not yet confirmed. Build and extend the "
                "cache in a local folder (--out DIR) and `latentforge publish DIR URL`: publishing the extended cache "
                "again to the same prefix updates it there. Or rebuild this one from the grown input with --overwrite")

    @classmethod
    def record(cls, output: OutputConfig) -> dict[str, Any]:
        return {"name": SINK, "shard_bytes": sink_options(output).shard_bytes}

    @staticmethod
    def commit(output: OutputConfig, build_dir: Path, staged: StagedCache) -> SinkCommit:
        # Credentials and endpoint come from the environment (AWS_* for s3://), as fsspec reads them.
        options = WebDatasetOptions(build_dir / TARS_DIR, shard_bytes=sink_options(output).shard_bytes)
        result = commit_webdataset(Destination(output.root), staged.unit_paths, staged.plan_rejects,
                                   staged.cache_config, staged.empty_prompt, options, staged.planned,
                                   staged.allow_empty, records=build_dir)
        unit_rejects = [r for path in staged.unit_paths for r in read_staged_rejects(path)]
        rejects = ordered_rejects(staged.plan_rejects, unit_rejects)
        return SinkCommit(result.num_samples, dict(sorted(Counter(r.reason for r in rejects).items())))

    @classmethod
    def verify(cls, root: CacheRoot, require_complete: bool, progress: Progress | None) -> VerifyReport:
        """The integrity checks of tar shards at a folder or an fsspec URL, one read per object."""
        from .integrity import verify_webdataset

        return read_whole_root(str(root), lambda location: verify_webdataset(location, require_complete, progress,
                                                                             root.storage_options))

    @classmethod
    def inspect(cls, root: CacheRoot) -> CacheSummary:
        from .inspect import inspect_webdataset

        summary = read_whole_root(str(root), lambda location: inspect_webdataset(location, root.storage_options))
        return dataclasses.replace(summary, root=str(root))  # the root, read mid-swap or not

    @classmethod
    def dataset(cls, root: CacheRoot, **options: Any) -> Any:
        """StreamingLatentDataset(root, ...): rank/worker split, seeded shuffle buffer, exact mid-epoch resume."""
        from .dataset import StreamingLatentDataset

        return StreamingLatentDataset(str(root), root.storage_options, **options)

    @classmethod
    def instead(cls, verb: str) -> str:
        return _INSTEAD.get(verb, super().instead(verb))
