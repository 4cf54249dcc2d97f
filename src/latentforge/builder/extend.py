"""`build --extend`: grow a built cache with the samples its input gained, without touching the rows it has.

The recorded plan (build/plan.jsonl) keeps every old sample's source_index, so its dataset_index stays; new
sample ids, in codepoint order, get the indices after the largest old one. Each extension is a segment of
the plan, recorded in build/run.json before the plan is rewritten, and units are numbered segment after
segment, so an interrupted extend rerun with the same command finds the same units staged (docs/extend.md).
"""

from __future__ import annotations

import dataclasses
import hashlib
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cache.layout import PLAN, RUN_RECORD
from ..errors import DamagedFile, DamagedFileWarning, LatentforgeError
from ..io import canonical_json
from ..pipeline.plan import FINGERPRINT_VERSION, content_key, read_plan, write_plan
from ..pipeline.run_record import read_run_record, write_run_record
from ..records import Reject, Sample

_EXAMPLES = 5  # ids quoted in a message


@dataclass(frozen=True)
class Extension:
    """The plan an extend builds: old samples with their indices, then the new ones."""

    samples: list[Sample]  # in source_index order
    added: list[str]  # ids this run added to the plan (none when it resumes an interrupted extend)
    removed: list[str]  # ids the recorded plan holds that the input no longer lists: their rows are kept
    segment_starts: list[int]  # first source_index of the first build and of each extension


def _quote(ids: list[str]) -> str:
    more = f" and {len(ids) - _EXAMPLES} more" if len(ids) > _EXAMPLES else ""
    return ", ".join(repr(i) for i in ids[:_EXAMPLES]) + more


def refuse_plain_rerun(build_dir: Path) -> None:
    """A plain build renumbers the plan from 0, which an extended cache's staged units do not follow."""
    record = read_run_record(build_dir)
    if record is not None and len(record.get("segments", [0])) > 1:
        raise LatentforgeError(f"{Path(build_dir).parent} was extended; a plain rerun would renumber its rows. "
                               "Rerun with --extend (or --overwrite to start over)")


def _fingerprint(entries: dict[str, str]) -> dict[str, Any]:
    digest = hashlib.sha256(canonical_json(entries).encode("utf-8")).hexdigest()
    return {"version": FINGERPRINT_VERSION, "count": len(entries), "sha256": digest, "entries": entries}


def plan_extension(build_dir: Path, key: dict[str, Any], listing: list[Sample], plan_rejects: list[Reject]
                   ) -> Extension:
    """Merge the input's listing into the recorded plan; record it and `key` (run.json first, then the plan).

    Refuses when there is nothing to extend or when a recorded sample's source changed (same id, other
    content: its row would no longer be what the input says)."""
    build_dir = Path(build_dir)
    record = read_run_record(build_dir)
    old = _recorded_plan(build_dir, record, listing)
    if record is None or not old:
        raise LatentforgeError(f"--extend needs a cache built here before: {build_dir} holds no run.json and "
                               "plan.jsonl. Build it once without --extend")
    recorded: dict[str, str] = record["inputs"]["entries"]
    now = {s.sample_id: content_key(s) for s in listing}
    changed = sorted(i for i in now if i in recorded and recorded[i] != now[i])
    if changed:
        raise LatentforgeError(f"--extend refused: {len(changed)} source(s) changed since they were encoded "
                               f"(same id, other file size, mtime, caption or window): {_quote(changed)}. "
                               "Restore them, give the new content new ids, or rebuild with --overwrite")
    first_new = max(s.source_index for s in old.values()) + 1
    new = [dataclasses.replace(s, source_index=first_new + i)
           for i, s in enumerate(s for s in listing if s.sample_id not in old)]
    segments = list(record.get("segments", [0]))
    if new and segments[-1] != first_new:
        segments.append(first_new)
    samples = sorted(old.values(), key=lambda s: s.source_index) + new
    write_run_record(build_dir, key, _fingerprint({**recorded, **now}), segments)
    write_plan(build_dir, samples, plan_rejects)
    return Extension(samples, [s.sample_id for s in new], sorted(set(old) - set(now)), segments)


def _recorded_plan(build_dir: Path, record: dict[str, Any] | None, listing: list[Sample]) -> dict[str, Sample]:
    """build/plan.jsonl; when it is damaged, the plan of a cache never extended, which was the input's listing
    of the ids run.json records, in order (make_plan): what is left of it in `listing`, numbered again from 0."""
    path = Path(build_dir) / PLAN
    try:
        plan = read_plan(build_dir)
    except DamagedFile as damaged:
        problem = damaged.problem
    else:
        problem = _disagreement(plan, record) if record is not None and plan else None
        if problem is None:
            return plan
    if record is None or len(record.get("segments", [0])) > 1:
        raise DamagedFile(path, problem, "the plan of an extended cache cannot be made again from its input; "
                          "rebuild the cache from the grown input with --overwrite")
    recorded = record["inputs"]["entries"]
    kept = sorted((s for s in listing if s.sample_id in recorded), key=lambda s: s.sample_id)
    gone = sorted(set(recorded) - {s.sample_id for s in kept})
    if gone:
        raise DamagedFile(path, problem, f"it can be made again from the input only while that still lists every "
                          f"planned sample, but {_quote(gone)} are gone; restore them, or rebuild the cache with "
                          "--overwrite")
    warnings.warn(f"{path} was damaged ({problem}); the plan is made again from the input", DamagedFileWarning,
                  stacklevel=3)
    return {s.sample_id: dataclasses.replace(s, source_index=i) for i, s in enumerate(kept)}


def _disagreement(plan: dict[str, Sample], record: dict[str, Any]) -> str | None:
    """How a plan that parses is not the one run.json describes (one cut at a line boundary), or None. It holds
    recorded samples numbered 0..N-1: all of them, or, after an extend stopped between writing run.json and the
    plan, exactly those before the last segment."""
    recorded, segments = record["inputs"]["entries"], record.get("segments", [0])
    counts = {len(recorded), segments[-1] if len(segments) > 1 else len(recorded)}
    dense = sorted(s.source_index for s in plan.values()) == list(range(len(plan)))
    if len(plan) not in counts or not dense or not set(plan) <= set(recorded):
        return f"it lists {len(plan)} samples, {RUN_RECORD} records {len(recorded)}"
    return None


def unit_numbers(samples: list[Sample], unit_size: int, segment_starts: list[int]) -> dict[int, int]:
    """{source_index: unit}: the samples of each segment, in source_index order, cut into units of unit_size and
    numbered after the previous segment's units. `samples`: a plan (dense source_index values), or the members a
    bucketed root's plan gave one bucket (a subset of them, whose segments may hold few samples or none)."""
    ordered = sorted(s.source_index for s in samples)
    numbers: dict[int, int] = {}
    first_unit = 0
    for start, end in zip(segment_starts, [*segment_starts[1:], None]):
        inside = [i for i in ordered if start <= i and (end is None or i < end)]
        numbers.update((index, first_unit + position // unit_size) for position, index in enumerate(inside))
        first_unit += -(-len(inside) // unit_size)
    return numbers


def planned_units(unit_of: dict[int, int]) -> dict[int, tuple[int, ...]]:
    """{unit: source_index of its samples} of a plan numbered by unit_numbers."""
    grouped: dict[int, list[int]] = {}
    for source_index, unit in sorted(unit_of.items()):
        grouped.setdefault(unit, []).append(source_index)
    return {unit: tuple(sources) for unit, sources in sorted(grouped.items())}
