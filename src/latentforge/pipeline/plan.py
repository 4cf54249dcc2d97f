"""plan: the input listing becomes a deterministic, ordered list of candidate samples (docs/inputs.md).

Also the inputs' fingerprint, so a resumed build can say what changed since the plan was written.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import unicodedata
from pathlib import Path
from typing import Any, Callable

from .. import registry
from ..cache.layout import FINGERPRINT, PLAN, PLAN_REJECTS
from ..config import BuildConfig, window_step
from ..decode.stream_probe import probe_video
from ..errors import DamagedFile, LatentforgeError
from ..io import canonical_json, write_jsonl_atomic, write_text_atomic
from ..records import Reject, Sample, SourceEntry
from ..transforms.window import window_starts
from .analysis_records import Analyser, analyse_serially, analysis_needed
from .segments import SegmentPlanner

FINGERPRINT_VERSION = 1
_REPLAN = "rerun the build command: it makes the plan again from the input"
_EXAMPLES = 3  # ids quoted per kind of change in a diff message


def _candidates(entry: SourceEntry, starts: list[int] | None) -> list[tuple[str, int | None]]:
    """(sample_id, start_frame) of each window of one entry.

    One start keeps the plain key (the suffix marks a video that yields *several* windows), so a
    clip's id is the same under `windows: one` and under `windows: every N` when only one window fits.
    """
    if starts is None:
        return [(entry.key, None)]
    if len(set(starts)) != len(starts) or any(not isinstance(s, int) or s < 0 for s in starts):
        raise LatentforgeError(f"window starts {starts!r} of {entry.key!r} must be distinct integers >= 0")
    if len(starts) == 1:
        return [(entry.key, starts[0])]
    return [(f"{entry.key}@{start}", start) for start in starts]


_DIFFERENCE_FIELDS = ("video_rel", "caption", "mask", "depth", "t5_pickle")


def _first_difference(kept: SourceEntry, repeat: SourceEntry) -> str:
    """How a repeated row differs from the kept one: its first differing field, or that it is the same row."""
    pairs = [(name, getattr(kept, name), getattr(repeat, name)) for name in _DIFFERENCE_FIELDS]
    pairs += [(f"column {name!r}", kept.extra.get(name), repeat.extra.get(name))
              for name in sorted(set(kept.extra) | set(repeat.extra))]
    for name, first, second in pairs:
        if first != second:
            return f"they differ in {'video' if name == 'video_rel' else name}: {_short(first)} vs {_short(second)}"
    return "same row repeated"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "...'"


def first_entries(entries: list[SourceEntry]) -> tuple[list[SourceEntry], list[Reject]]:
    """One entry per id, in listing order: the first occurrence of an id wins, and later ones are `duplicate_id`
    rejects naming both rows and how they differ. The plan's id rule; every path back to the sources (deep verify,
    preview) goes through it, so they re-read the row the build kept."""
    kept: dict[str, SourceEntry] = {}
    rejects: list[Reject] = []
    for position, entry in enumerate(entries):
        # NFC again here, so entries built by any reader agree on one id per visible name
        key = unicodedata.normalize("NFC", entry.key)
        origin = entry.origin or f"listing entry {position} ({entry.video_rel})"
        if key != entry.key or origin != entry.origin:
            entry = dataclasses.replace(entry, key=key, origin=origin)
        if key in kept:
            first = kept[key]
            rejects.append(Reject(key, -1, "duplicate_id", f"{origin} repeats the id of {first.origin}, which is "
                                  f"kept; {_first_difference(first, entry)}", "plan"))
        else:
            kept[key] = entry
    return list(kept.values()), rejects


WindowsFor = Callable[[SourceEntry], "tuple[list[tuple[str, int | None, dict[str, Any] | None]], list[Reject]]"]


def make_plan(
    entries: list[SourceEntry],
    starts_for: Callable[[SourceEntry], list[int] | None] | None,
    limit: int | None = None,
    windows_for: WindowsFor | None = None,
) -> tuple[list[Sample], list[Reject]]:
    """Samples in plan_order of sample_id (codepoints; windows of one video by start frame) with source_index =
    position, and the plan's rejects.

    A repeated id keeps its first occurrence in listing order (first_entries); later ones are `duplicate_id`
    rejects, as is a window id that another entry's id already took. An entry for which `starts_for` returns []
    yields no window: a `too_short` reject. `limit` keeps the first N samples after sorting, and only the rejects
    whose id sorts within them. `windows_for` (segments: pipeline/segments.py) replaces `starts_for`: each entry's
    (sample_id, start_frame, segment record) windows and its own plan rejects.
    """
    if limit is not None and limit < 0:
        raise LatentforgeError(f"dataset.limit={limit} must be >= 0")
    unique, rejects = first_entries(entries)
    first: dict[str, tuple[SourceEntry, int | None, dict[str, Any] | None]] = {}
    for entry in unique:
        if windows_for is not None:
            windows, refused = windows_for(entry)
            rejects += refused
        else:
            starts = starts_for(entry) if starts_for is not None else None
            if starts == []:
                rejects.append(Reject(entry.key, -1, "too_short", f"{entry.video_rel}: no window of the configured "
                                      "length fits the video", "plan"))
                continue
            windows = [(sample_id, start, None) for sample_id, start in _candidates(entry, starts)]
        for sample_id, start, segment in windows:
            if sample_id in first:
                kept = first[sample_id][0]
                rejects.append(Reject(sample_id, -1, "duplicate_id", f"window {sample_id!r} of {entry.origin} is "
                                      f"also the id of {kept.origin}, which is kept", "plan"))
            else:
                first[sample_id] = (entry, start, segment)
    ids = sorted(first, key=plan_order)
    if limit is not None:
        ids = ids[:limit]
    samples = [Sample(sid, index, *first[sid]) for index, sid in enumerate(ids)]
    if limit is not None:
        rejects = [r for r in rejects if ids and plan_order(r.sample_id) <= plan_order(ids[-1])]
    rejects.sort(key=lambda r: plan_order(r.sample_id))  # stable: a repeated id keeps listing order
    return samples, rejects


def plan_order(sample_id: str) -> tuple[str, int]:
    """Where a sample id sorts: by codepoints, a window `<key>@<start>` after its key by its start frame as a number
    (`clip@48` before `clip@1008`)."""
    key, at, start = sample_id.rpartition("@")
    return (key, int(start)) if at and start.isascii() and start.isdigit() else (sample_id, -1)


def _window_starts_for(config: BuildConfig) -> Callable[[SourceEntry], list[int] | None] | None:
    """Under `frames.windows: every N`, the start frames of an entry's windows (None when its video cannot be
    probed: the probe then rejects it with the reason)."""
    step = window_step(config.frames)
    if step is None:
        return None

    def starts(entry: SourceEntry) -> list[int] | None:
        try:
            info = probe_video(entry.video, entry.key)
        except Exception:  # noqa: BLE001 - a rejected or failing video: the probe rejects it, naming why
            return None
        return [s for s in window_starts(info, config.frames) if s % step == 0] or None

    return starts


def plan_samples(config: BuildConfig, analyse: Analyser | None = None) -> tuple[list[Sample], list[Reject]]:
    """The build's plan: its reader's listing cut into windows, ordered, with the plan's rejects. With segments (a
    segments key set, or table rows naming segments) every video is analysed first (`analyse`: the builder's,
    recorded under build/analysis/ and spread over processes; else in this process, unrecorded) and windows are
    placed inside its shots and segments."""
    reader = registry.resolve("reader", config.dataset.reader)(config.dataset)
    entries = reader.entries()
    if not analysis_needed(config, entries):
        samples, rejects = make_plan(entries, _window_starts_for(config), config.dataset.limit)
    else:
        unique, _ = first_entries(entries)
        analyses = (analyse or analyse_serially(config, None))(unique)
        planner = SegmentPlanner(config, analyses)
        samples, rejects = make_plan(entries, None, config.dataset.limit, windows_for=planner.windows)
    if reader.rejects:  # what the listing names but cannot be used (readers/base.py)
        rejects = sorted(rejects + reader.rejects, key=lambda r: plan_order(r.sample_id))
    return samples, rejects


def _stat(path: str | None) -> list[int] | None:
    if path is None:
        return None
    try:
        status = os.stat(path)
    except OSError:
        return None
    return [status.st_size, status.st_mtime_ns]


def content_key(sample: Sample) -> str:
    """Cheap key of what a sample is made of: size and mtime of its sources, caption hash, window, extra.

    A copied dataset gets new mtimes and reads as "changed"; rewriting a file in place within the same
    nanosecond with the same size would not be seen (that needs a content hash, which costs a full read).
    """
    entry = sample.entry
    caption = None if entry.caption is None else hashlib.sha256(entry.caption.encode("utf-8")).hexdigest()
    parts = {
        "video": [entry.video_rel, _stat(entry.video)],
        "caption": caption,
        "mask": _stat(entry.mask),
        "depth": _stat(entry.depth),
        "start_frame": sample.start_frame,
        "extra": entry.extra,
    }
    if entry.segment is not None or sample.segment is not None:  # keys of plans without segments stay as they were
        parts.update(segment=entry.segment, window_segment=sample.segment)
    if entry.side:  # as are those of plans without side streams
        parts["side"] = {name: _stat(path) for name, path in sorted(entry.side.items())}
    return hashlib.sha256(canonical_json(parts).encode("utf-8")).hexdigest()[:16]


def plan_fingerprint(samples: list[Sample]) -> dict[str, Any]:
    """{"version", "count", "sha256", "entries": {sample_id: content_key}} in plan order."""
    entries = {sample.sample_id: content_key(sample) for sample in samples}
    digest = hashlib.sha256(canonical_json(entries).encode("utf-8")).hexdigest()
    return {"version": FINGERPRINT_VERSION, "count": len(samples), "sha256": digest, "entries": entries}


def diff_fingerprints(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """None when the inputs are unchanged, else "N added, M removed, K changed (e.g. ...)"."""
    if old.get("version") != new.get("version"):
        return f"the fingerprint format changed (version {old.get('version')} -> {new.get('version')})"
    if old["sha256"] == new["sha256"]:
        return None
    before, after = old["entries"], new["entries"]
    kinds = {
        "added": [i for i in after if i not in before],
        "removed": [i for i in before if i not in after],
        "changed": [i for i in after if i in before and before[i] != after[i]],
    }
    summary = ", ".join(f"{len(ids)} {kind}" for kind, ids in kinds.items())
    examples = "; ".join(f"{kind}: {', '.join(repr(i) for i in ids[:_EXAMPLES])}"
                         for kind, ids in kinds.items() if ids)
    return f"{summary} ({examples})" if examples else summary


def _sample_row(sample: Sample) -> dict[str, Any]:
    entry = dataclasses.asdict(sample.entry)
    if entry["segment"] is None:  # the rows of plans without segments stay as they were
        del entry["segment"]
    if not entry["side"]:  # as the rows of plans without side streams were
        del entry["side"]
    row = {"sample_id": sample.sample_id, "source_index": sample.source_index, "start_frame": sample.start_frame,
           **entry}
    if sample.segment is not None:
        row["window_segment"] = sample.segment
    return row


def read_plan(build_dir: Path) -> dict[str, Sample]:
    """The samples build/plan.jsonl records, by sample_id ({} when there is no plan: a fetched cache); DamagedFile
    when a line is not a planned sample."""
    path = Path(build_dir) / PLAN
    if not path.is_file():
        return {}
    samples = {}
    with open(path, encoding="utf-8") as handle:
        try:
            for number, line in enumerate(handle, start=1):
                sample = _planned_sample(line)
                if sample is None:
                    raise DamagedFile(path, f"line {number} is not a planned sample", _REPLAN)
                samples[sample.sample_id] = sample
        except ValueError as error:  # not UTF-8
            raise DamagedFile(path, str(error), _REPLAN) from None
    return samples


def _planned_sample(line: str) -> Sample | None:
    try:
        row = json.loads(line)
        sample_id, source_index, start = row.pop("sample_id"), row.pop("source_index"), row.pop("start_frame")
        segment = row.pop("window_segment", None)
        return Sample(sample_id, source_index, SourceEntry(**row), start, segment)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def write_plan(build_dir: Path, samples: list[Sample], rejects: list[Reject]) -> None:
    """build/plan.jsonl, build/plan_rejects.jsonl and build/fingerprint.json, each written atomically.

    File names are fixed: sample ids only ever appear inside the files.
    """
    build_dir = Path(build_dir)
    write_jsonl_atomic(build_dir / PLAN, [_sample_row(s) for s in samples])
    write_jsonl_atomic(build_dir / PLAN_REJECTS, [r.to_json() for r in rejects])
    write_text_atomic(build_dir / FINGERPRINT, canonical_json(plan_fingerprint(samples)) + "\n")
