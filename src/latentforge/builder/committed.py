"""A build's commit, remembered: which plan the cache at the root was committed from (build/committed.json), so a
rerun with nothing new leaves the cache as it is instead of writing it again, and the staged units a verified commit
holds in the cache give way to records of their rows (staging/staging.retire_staged_units), so the build's disk is
the cache's size, not twice it.

The record also holds the size and mtime of every file SHA256SUMS lists, of SHA256SUMS and of the complete-marker
as the verified commit left them. A rerun finds the cache unchanged by those alone, in proportion to the number of
files, not their bytes; any difference (or `recheck`, or a cache at a URL) reads the cache whole with the sink's
integrity verify, as before."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Mapping, Sequence

from .. import registry
from ..cache.generation_swap import finish_swap
from ..cache.layout import COMMITTED_RECORD, COMPLETE_MARKER, SUMS
from ..cache.root import CacheRoot
from ..config import BuildConfig
from ..io import canonical_json, write_text_atomic
from ..records import Reject
from ..sinks.base import SinkCommit
from ..staging.remote_staging import retire_units


def _plan_digest(planned: Mapping[int, Sequence[int]], plan_rejects: list[Reject]) -> str:
    plan = {"planned": {str(unit): list(sources) for unit, sources in sorted(planned.items())},
            "plan_rejects": [r.to_json() for r in plan_rejects]}
    return hashlib.sha256(canonical_json(plan).encode("utf-8")).hexdigest()


def _file_stats(root: CacheRoot) -> dict[str, list[int]] | None:
    """{relative path: [size, mtime_ns]} of the files SHA256SUMS lists, SHA256SUMS and the complete-marker; None
    for a root at a URL or one without both files (its integrity verify says what is wrong)."""
    if root.is_url:
        return None
    folder = Path(root.location)
    try:
        listed = [line.split("  ", 1)[1] for line in (folder / SUMS).read_text(encoding="utf-8").splitlines() if line]
        stats = {}
        for rel in [*listed, SUMS, COMPLETE_MARKER]:
            found = (folder / rel).stat()
            stats[rel] = [found.st_size, found.st_mtime_ns]
    except (OSError, IndexError, UnicodeDecodeError):
        return None
    return stats


def record_commit(config: BuildConfig, build_dir: Path, planned: Mapping[int, Sequence[int]],
                  plan_rejects: list[Reject]) -> None:
    """The sink's commit of this plan finished and verified: say so, then retire the staged units it holds."""
    record = {"plan_sha256": _plan_digest(planned, plan_rejects),
              "files": _file_stats(CacheRoot.of(config.output.root))}
    write_text_atomic(Path(build_dir) / COMMITTED_RECORD, canonical_json(record) + "\n")
    retire_units(build_dir, config.output.staging_url)


def _recorded(build_dir: Path) -> tuple[str, dict[str, list[int]] | None] | None:
    """(plan digest, file stats) of build/committed.json; None without a readable one."""
    try:
        record = json.loads((Path(build_dir) / COMMITTED_RECORD).read_text(encoding="utf-8"))
        return record["plan_sha256"], record.get("files")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def committed_from(build_dir: Path, planned: Mapping[int, Sequence[int]], plan_rejects: list[Reject]) -> bool:
    """Was the cache at the root last committed from exactly this plan?"""
    recorded = _recorded(build_dir)
    return recorded is not None and recorded[0] == _plan_digest(planned, plan_rejects)


def committed_before(config: BuildConfig, build_dir: Path, planned: Mapping[int, Sequence[int]],
                     plan_rejects: list[Reject], recheck: bool = False) -> SinkCommit | None:
    """What the cache at the root holds when it was committed from exactly this plan and still passes its integrity
    verify (the staged units it holds are retired, should a kill have left some); None when there is a commit to
    do, which is also how a committed cache that no longer verifies is mended: the commit takes retired units' rows
    from the shards that still hold them as written (staging/committed_rows.py) and refuses, naming the fix, when
    one is gone. Unchanged sizes and mtimes of the cache's files stand for its verify unless `recheck`."""
    recorded = _recorded(build_dir)
    if recorded is None or recorded[0] != _plan_digest(planned, plan_rejects):
        return None
    files = recorded[1]
    sink = registry.resolve("sink", config.output.sink)
    root = CacheRoot.of(config.output.root)
    if not root.is_url:
        finish_swap(Path(root.location))  # a swap a kill cut short: its files as the verified commit left them
    unchanged = not recheck and files is not None and files == _file_stats(root)
    if not unchanged and not sink.verify(root, True, None).ok:
        return None
    retire_units(build_dir, config.output.staging_url)
    summary = sink.inspect(root)
    return SinkCommit(summary.config.num_samples, dict(sorted(summary.rejects.items())))
