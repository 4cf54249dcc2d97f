"""A sink: one cache format, whole. What a build hands it (StagedCache), what its commit gives back (SinkCommit),
and the read side every verb dispatches to: integrity verify, inspect, the training Dataset, and the local HDF5
folder the verbs that read HDF5 shards need (or why this format has none).

A sink is a subclass of Sink registered by name (registry kind "sink"); the build finds it from output.sink, every
reader from the sink its cache_config.json records (sinks/dispatch.py). Nothing else branches on its name.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Sequence

import numpy as np

from ..cache.check_report import VerifyReport
from ..cache.config_file import CacheConfig
from ..cache.ownership import RootLayout
from ..cache.root import CacheRoot
from ..cache.summary import CacheSummary
from ..config.schema import NoOptions, OutputConfig
from ..errors import ConfigError
from ..progress import Progress
from ..records import Reject

if TYPE_CHECKING:
    from ..config.schema import BuildConfig


@dataclass(frozen=True)
class StagedCache:
    """Everything a commit needs: the staged units (in unit order), the plan they must cover ({unit: source_index
    of its samples}), the plan's rejects and the cache's description. `allow_empty`: a cache of no sample may be
    committed (a bucket of a bucketed build whose samples were all rejected). `publish`: False leaves the verified
    cache in ROOT/build/next for its bucketed root's commit to move in (an HDF5 bucket that `--extend` grows)."""

    unit_paths: list[Path]
    planned: Mapping[int, Sequence[int]]
    plan_rejects: list[Reject]
    cache_config: CacheConfig
    empty_prompt: tuple[np.ndarray, np.ndarray] | None
    readme_context: dict[str, Any]
    allow_empty: bool = False
    publish: bool = True


@dataclass(frozen=True)
class SinkCommit:
    num_samples: int
    rejects_by_reason: dict[str, int]  # every reject the committed cache lists, by reason, sorted


class Sink:
    """Subclass it, fill in the five methods, register it: `latentforge build --set output.sink=NAME` commits
    through it and verify, inspect and `latentforge.dataset.cache_dataset` read through it."""

    name: ClassVar[str]  # the registry name, which its commit records in cache_config.json ("sink": {"name": ...})
    # True: output.root may be an fsspec URL and the commit owns every object under it, so the build records
    # (plan, staged units, run.json, lock) live in a node-local staging folder instead of ROOT/build.
    remote_root: ClassVar[bool] = False
    # what a root of this format holds: a build writes only into an empty root or one of its own with nothing else in
    # it; None (a sink that declares none): any root latentforge made, whatever it holds
    root_layout: ClassVar[RootLayout | None] = None
    # its own output.* keys, as a dataclass with their defaults; load_config parses them into OutputConfig.options
    options_class: ClassVar[type] = NoOptions

    @classmethod
    def check_config(cls, config: BuildConfig) -> None:
        """The sink's part of the config checks (run before any model loads); ConfigError naming the key."""

    @classmethod
    def extend_refusal(cls, output: OutputConfig) -> str | None:
        """Why `build --extend` cannot add samples to a committed cache of this sink at output.root, naming the fix
        (a ConfigError says it before anything is read); None when it can."""
        return (f"--extend grows a cache in place, but output.sink={output.sink!r} replaces every object at commit; "
                "rebuild it from the grown input with --overwrite (or into a new output root)")

    @classmethod
    def record(cls, output: OutputConfig) -> dict[str, Any] | None:
        """The "sink" section its commit writes into cache_config.json, which is how every reader finds it again
        (None: none, the HDF5 sink's default)."""
        return {"name": cls.name}

    @staticmethod
    def commit(output: OutputConfig, build_dir: Path, staged: StagedCache) -> SinkCommit:
        raise NotImplementedError

    @classmethod
    def verify(cls, root: CacheRoot, require_complete: bool, progress: Progress | None) -> VerifyReport:
        """The integrity checks of this format's layout (`latentforge verify ROOT`)."""
        raise NotImplementedError

    @classmethod
    def inspect(cls, root: CacheRoot) -> CacheSummary | Any:
        """What the cache holds, from its records (`latentforge inspect ROOT`): a CacheSummary, or another
        summary with to_json()."""
        raise NotImplementedError

    @classmethod
    def dataset(cls, root: CacheRoot, **options: Any) -> Any:
        """The training Dataset of the cache (latentforge.dataset.cache_dataset(root, **options))."""
        raise NotImplementedError

    @classmethod
    def local_hdf5(cls, root: CacheRoot, verb: str) -> Path:
        """The local folder of HDF5 shards `verb` (stats, preview, export, query, verify --deep) reads; a format
        without one raises ConfigError saying what to do instead."""
        raise ConfigError(f"{root} is a {cls.name} cache, but {verb} reads HDF5 caches only; {cls.instead(verb)}")

    @classmethod
    def instead(cls, verb: str) -> str:
        """What to do instead of `verb` with a cache of this sink."""
        return f"build the same config with output.sink=hdf5 to run {verb} on it"
