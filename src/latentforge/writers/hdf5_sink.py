"""The default sink: sharded HDF5 committed into the local folder output.root (writers/commit.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from ..cache.rows import read_rejects
from ..config.schema import OutputConfig
from .commit import commit_cache
from .sink import SinkCommit, StagedCache


class Hdf5Sink:
    remote_root = False

    @staticmethod
    def commit(output: OutputConfig, build_dir: Path, staged: StagedCache) -> SinkCommit:
        root = Path(output.root)
        result = commit_cache(root, staged.unit_paths, staged.plan_rejects, staged.cache_config, staged.empty_prompt,
                              staged.readme_context, staged.planned, staged.allow_empty)
        return SinkCommit(result.num_samples, dict(sorted(Counter(r.reason for r in read_rejects(root)).items())))
