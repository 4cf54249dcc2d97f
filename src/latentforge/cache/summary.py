"""What `latentforge inspect` shows of one cache, whatever its sink: counts, markers, shard files, reject reasons,
the stored arrays and the config (each sink's inspect fills it from its own records)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config_file import CacheConfig


@dataclass(frozen=True)
class ShardFile:
    path: str  # relative to the root
    start: int  # first dataset_index
    end: int  # one past the last
    bytes: int

    @property
    def rows(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class BuildRecords:
    """What ROOT/build holds beside the cache (never checksummed): its size, and the staged units whose arrays are
    still there (none once a commit is verified)."""

    bytes: int
    staged_units: int
    staged_bytes: int

    def to_json(self) -> dict[str, int]:
        return {"bytes": self.bytes, "staged_units": self.staged_units, "staged_bytes": self.staged_bytes}


@dataclass(frozen=True)
class CacheSummary:
    root: Path | str  # a WebDataset cache's root may be a URL
    config: CacheConfig
    complete: bool  # _CACHE_COMPLETE is present
    published: bool  # _SUCCESS is present
    manifest_rows: int
    rejects: dict[str, int]  # reason -> count
    shards: list[ShardFile]
    # of the first shard: dtype, shape, chunks, compression (a WebDataset cache: its sink section)
    datasets: dict[str, dict[str, Any]]
    empty_prompt: dict[str, dict[str, Any]] | None
    records: BuildRecords | None = None  # ROOT/build, where the sink keeps its build records in the root

    @property
    def bytes(self) -> int:
        return sum(s.bytes for s in self.shards)

    def to_json(self) -> dict[str, Any]:
        return {
            "root": str(self.root),
            "complete": self.complete,
            "published": self.published,
            "num_samples": self.config.num_samples,
            "num_shards": self.config.num_shards,
            "manifest_rows": self.manifest_rows,
            "rejects": self.rejects,
            "bytes": self.bytes,
            "shards": [{"path": s.path, "start": s.start, "end": s.end, "rows": s.rows, "bytes": s.bytes}
                       for s in self.shards],
            "datasets": self.datasets,
            "empty_prompt": self.empty_prompt,
            "build_records": self.records.to_json() if self.records is not None else None,
            "config": self.config.to_json(),
        }
