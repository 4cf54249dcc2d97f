"""A build's commit, remembered: which plan the cache at the root was committed from (build/committed.json), so a
rerun with nothing new leaves the cache as it is instead of writing it again, and the staged units a verified commit
holds in the cache give way to records of their rows (writers/staging.retire_staged_units), so the build's disk is
the cache's size, not twice it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Mapping, Sequence

from .. import registry
from ..cache.layout import COMMITTED_RECORD
from ..cache.root import CacheRoot
from ..config import BuildConfig
from ..io import canonical_json, write_text_atomic
from ..records import Reject
from ..sinks.base import SinkCommit
from ..writers.remote_staging import retire_units


def _plan_digest(planned: Mapping[int, Sequence[int]], plan_rejects: list[Reject]) -> str:
    plan = {"planned": {str(unit): list(sources) for unit, sources in sorted(planned.items())},
            "plan_rejects": [r.to_json() for r in plan_rejects]}
    return hashlib.sha256(canonical_json(plan).encode("utf-8")).hexdigest()


def record_commit(config: BuildConfig, build_dir: Path, planned: Mapping[int, Sequence[int]],
                  plan_rejects: list[Reject]) -> None:
    """The sink's commit of this plan finished and verified: say so, then retire the staged units it holds."""
    write_text_atomic(Path(build_dir) / COMMITTED_RECORD,
                      canonical_json({"plan_sha256": _plan_digest(planned, plan_rejects)}) + "\n")
    retire_units(build_dir, config.output.staging_url)


def committed_before(config: BuildConfig, build_dir: Path, planned: Mapping[int, Sequence[int]],
                     plan_rejects: list[Reject]) -> SinkCommit | None:
    """What the cache at the root holds when it was committed from exactly this plan and still passes its integrity
    verify (the staged units it holds are retired, should a kill have left some); None when there is a commit to
    do, which is also how a committed cache that no longer verifies is mended: the commit takes retired units' rows
    from the shards that still hold them as written (writers/committed_rows.py) and refuses, naming the fix, when
    one is gone."""
    try:
        recorded = json.loads((Path(build_dir) / COMMITTED_RECORD).read_text(encoding="utf-8"))["plan_sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if recorded != _plan_digest(planned, plan_rejects):
        return None
    sink = registry.resolve("sink", config.output.sink)
    root = CacheRoot.of(config.output.root)
    if not sink.verify(root, True, None).ok:
        return None
    retire_units(build_dir, config.output.staging_url)
    summary = sink.inspect(root)
    return SinkCommit(summary.config.num_samples, dict(sorted(summary.rejects.items())))
