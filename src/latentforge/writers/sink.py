"""What a build hands its sink (output.sink) and what a sink gives back: the interface every sink implements.

A sink is registered by name (registry kind "sink"); the build looks it up and never branches on its name.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping, Protocol, Sequence

import numpy as np

from ..cache.config_file import CacheConfig
from ..config.schema import OutputConfig
from ..records import Reject


@dataclass(frozen=True)
class StagedCache:
    """Everything a commit needs: the staged units (in unit order), the plan they must cover ({unit: source_index
    of its samples}), the plan's rejects and the cache's description. `allow_empty`: a cache of no sample may be
    committed (a bucket of a bucketed build whose samples were all rejected)."""

    unit_paths: list[Path]
    planned: Mapping[int, Sequence[int]]
    plan_rejects: list[Reject]
    cache_config: CacheConfig
    empty_prompt: tuple[np.ndarray, np.ndarray] | None
    readme_context: dict[str, Any]
    allow_empty: bool = False


@dataclass(frozen=True)
class SinkCommit:
    num_samples: int
    rejects_by_reason: dict[str, int]  # every reject the committed cache lists, by reason, sorted


class Sink(Protocol):
    # True: output.root may be an fsspec URL and the commit owns every object under it, so the build records
    # (plan, staged units, run.json, lock) live in a node-local staging folder instead of ROOT/build.
    remote_root: ClassVar[bool]

    @staticmethod
    def commit(output: OutputConfig, build_dir: Path, staged: StagedCache) -> SinkCommit: ...

    # A sink other than hdf5 also has `verify(root: str, require_complete, progress) -> VerifyReport`: the
    # integrity checks of its own layout, which `latentforge verify` runs on a root that records that sink.
