"""The default sink: sharded HDF5 committed into the local folder output.root, read back from there (a bucketed
root, one cache per bucket, included)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...cache.bucket_index import is_bucketed
from ...cache.check_report import VerifyReport
from ...cache.layout import BUCKETED_ROOT_ENTRIES, ROOT_ENTRIES, shard_rows
from ...cache.ownership import RootLayout
from ...cache.root import CacheRoot
from ...cache.whole_read import read_whole
from ...config.schema import OutputConfig
from ...errors import ConfigError
from ...progress import Progress
from ..base import Sink, SinkCommit, StagedCache
from . import NAME
from .commit import commit_cache

if TYPE_CHECKING:
    from ...config.schema import BuildConfig


class Hdf5Sink(Sink):
    name = NAME
    root_layout = RootLayout(ROOT_ENTRIES | BUCKETED_ROOT_ENTRIES, lambda name: shard_rows(name) is not None)

    @classmethod
    def extend_refusal(cls, output: OutputConfig) -> str | None:
        return None  # its commit keeps the shards whose rows stay (docs/extend.md)

    @classmethod
    def check_config(cls, config: BuildConfig) -> None:
        root = CacheRoot.of(config.output.root)
        if root.is_url:  # as given, the build would write to a folder named after it ('s3:/...')
            raise ConfigError(
                f"output.root={root.location!r} is a URL, but a cache is built into a local folder (as given, the "
                f"build would write to a folder named {str(Path(root.location))!r}); build into a local folder with "
                f"--out, then copy it there with `latentforge publish LOCAL_FOLDER {root}`, or write tar shards "
                "straight there with --set output.sink=webdataset"
            )

    @classmethod
    def record(cls, output: OutputConfig) -> None:
        return None  # an HDF5 cache_config.json has no "sink" section: what every reader assumes without one

    @staticmethod
    def commit(output: OutputConfig, build_dir: Path, staged: StagedCache) -> SinkCommit:
        root = Path(output.root)
        result = commit_cache(root, staged.unit_paths, staged.plan_rejects, staged.cache_config, staged.empty_prompt,
                              staged.readme_context, staged.planned, staged.allow_empty, records=build_dir,
                              publish=staged.publish)
        return SinkCommit(result.num_samples, dict(sorted(Counter(r.reason for r in result.rejects).items())))

    @classmethod
    def verify(cls, root: CacheRoot, require_complete: bool, progress: Progress | None) -> VerifyReport:
        from .bucket_integrity import verify_bucketed
        from .integrity import verify_integrity

        folder = root.local_folder("verify")
        if is_bucketed(folder):
            return read_whole(folder, lambda published: verify_bucketed(published, require_complete, progress))
        return read_whole(folder, lambda published: verify_integrity(published, require_complete, progress))

    @classmethod
    def inspect(cls, root: CacheRoot) -> Any:
        from .inspect import inspect_bucketed, inspect_cache

        folder = root.local_folder("inspect")
        if is_bucketed(folder):
            return read_whole(folder, lambda published: inspect_bucketed(folder, published))
        return dataclasses.replace(read_whole(folder, inspect_cache), root=folder)  # the root, read mid-swap or not

    @classmethod
    def dataset(cls, root: CacheRoot, **options: Any) -> Any:
        """LatentCacheDataset, or BucketedLatentDataset for a bucketed root."""
        from .bucketed_dataset import BucketedLatentDataset
        from .dataset import LatentCacheDataset

        folder = root.local_folder("LatentCacheDataset")
        bucketed = is_bucketed(folder)
        return BucketedLatentDataset(folder, **options) if bucketed else LatentCacheDataset(folder, **options)

    @classmethod
    def local_hdf5(cls, root: CacheRoot, verb: str) -> Path:
        return root.local_folder(verb)
