"""What every sink's commit does first: the staged units' rows and rejects gathered into dataset order, checked
against the plan (every planned unit staged, each accounting for exactly its planned samples), and the manifest rows
and rejects in the order a cache lists them."""

from __future__ import annotations

import array
import bisect
import dataclasses
from pathlib import Path
from typing import Iterator, Mapping, Sequence

import numpy as np

from ..cache.encoded_by import EncodedBy, group_units
from ..cache.layout import ShardSchema
from ..cache.rows import ManifestRow
from ..cache.text_rows import PADDED
from ..errors import CacheIntegrityError
from ..records import Reject
from .placed_rows import PlacedRow, PlacedRows
from .staged_units import CommittedArrays, OpenStagedUnit, StagedRow, open_staged_unit, read_staged_rows

Planned = Mapping[int, Sequence[int]]  # {unit: the source_index of every sample the plan put in it}


def _check_unit_arrays(path: Path, staged: OpenStagedUnit, schema: ShardSchema) -> None:
    want = dataclasses.replace(schema, text_storage=PADDED).dataset_specs(len(staged.rows))  # staged text is padded
    problems = []
    got_latent = (staged.latents.dtype, staged.latents.shape)
    if got_latent != want[schema.latent_dataset]:
        problems.append(f"latents are {got_latent[0]} {list(got_latent[1])}, want {want[schema.latent_dataset]}")
    # A unit whose samples were all rejected encodes no prompt, so it may hold no text arrays at all.
    if staged.rows and (staged.text_embeddings is None) != (schema.text_prefix is None):
        problems.append(f"text arrays {'missing' if staged.text_embeddings is None else 'present'} "
                        f"but the cache's text prefix is {schema.text_prefix!r}")
    elif staged.text_embeddings is not None:
        got_text = (staged.text_embeddings.dtype, staged.text_embeddings.shape)
        if got_text != want[schema.embeddings_dataset]:
            problems.append(f"text embeddings are {got_text[0]} {list(got_text[1])}, "
                            f"want {want[schema.embeddings_dataset]}")
    for stream in schema.conditioning:
        values = staged.conditioning.get(stream.name)
        got = None if values is None else (values.dtype, values.shape)
        if got != want[stream.name]:
            problems.append(f"conditioning {stream.name} is {'missing' if got is None else f'{got[0]} {list(got[1])}'}"
                            f", want {want[stream.name]}")
    extra = sorted(set(staged.conditioning) - {stream.name for stream in schema.conditioning})
    if extra:
        problems.append(f"conditioning {extra} staged but not in the cache's conditioning streams")
    if problems:
        raise CacheIntegrityError(f"staged unit {path}: " + "; ".join(problems))


def _check_against_plan(accounted: dict[int, list], planned: Planned) -> None:
    """Every planned unit is staged, no other, and each accounts (kept or rejected) for exactly its planned
    samples: a unit lost on the way (a stale listing, a deleted file) fails the commit instead of shrinking it."""
    problems = []
    missing, extra = sorted(set(planned) - set(accounted)), sorted(set(accounted) - set(planned))
    if missing:
        problems.append(f"{len(missing)} of {len(planned)} planned units are not staged (units {_some(missing)})")
    if extra:
        problems.append(f"staged units {_some(extra)} are not in the plan")
    for unit in sorted(set(planned) & set(accounted)):
        want, got = set(planned[unit]), set(_flat(accounted[unit]))
        if want != got:
            problems.append(f"unit {unit} accounts for source_index {_some(sorted(got - want))} beyond its plan "
                            f"and lacks {_some(sorted(want - got))}")
    if problems:
        raise CacheIntegrityError("the staged units do not cover the plan: " + "; ".join(problems[:5]) + ". "
                                  "Rerun the same command: it encodes what is missing (--overwrite starts over)")


def _flat(parts: list) -> list:
    """The source indices of a unit's staged files: arrays of their rows' and lists of their rejects'."""
    return [value for part in parts for value in (part.tolist() if isinstance(part, np.ndarray) else part)]


def _some(values: list[int]) -> str:
    return ", ".join(map(str, values[:8])) + (f" and {len(values) - 8} more" if len(values) > 8 else "") or "none"


def gather_staged(schema: ShardSchema, unit_paths: list[Path], planned: Planned, allow_empty: bool = False,
                  committed: CommittedArrays | None = None
                  ) -> tuple[PlacedRows, list[Reject], tuple[EncodedBy, ...] | None]:
    """The rows and rejects of the staged units, checked against `planned` ({unit: its samples' source_index}).
    No rows at all fail unless `allow_empty` (one bucket of a bucketed build may end up empty; the build may not).
    `committed`: where retired units' arrays are (the cache they were committed into)."""
    sources: list[np.ndarray] = []
    rejects: list[Reject] = []
    encoders: dict[int, dict] = {}
    accounted: dict[int, list] = {}  # unit -> arrays of its rows' source_index, lists of its rejects'
    id_hashes = array.array("q")
    paths = sorted(unit_paths)
    for path in paths:
        with open_staged_unit(path, committed) as staged:
            _check_unit_arrays(path, staged, schema)
            sources.append(np.array([row.source_index for row in staged.rows], dtype=np.int64))
            id_hashes.extend(hash(row.sample_id) for row in staged.rows)
            rejects.extend(staged.rejects)
            accounted.setdefault(staged.unit, []).extend(
                [sources[-1], [reject.source_index for reject in staged.rejects]])
            if staged.encoded_by is not None:
                encoders[staged.unit] = staged.encoded_by
    _check_against_plan(accounted, planned)
    del accounted
    if encoders and len(encoders) != len(unit_paths):
        raise CacheIntegrityError(f"{len(unit_paths) - len(encoders)} staged unit(s) do not record which encoder "
                                  "made them; remove the stale staged units")
    placed = PlacedRows.of_units(paths, sources)
    values, counts = np.unique(placed.source_index, return_counts=True)
    for what, dupes in (("source_index", values[counts > 1][:5].tolist()),
                        ("sample_id", _repeated_ids(paths, id_hashes)[:5])):
        if dupes:
            raise CacheIntegrityError(f"{what} {dupes} staged more than once; remove the stale staged units")
    rejected = np.array([r.source_index if isinstance(r.source_index, int) else -1 for r in rejects], dtype=np.int64)
    both = sorted(r.sample_id for r, hit in zip(rejects, np.isin(rejected, values) & (rejected >= 0)) if hit)
    if both:
        raise CacheIntegrityError(f"samples {both[:5]} are both staged and rejected; remove the stale staged units")
    if not len(placed) and not allow_empty:
        raise CacheIntegrityError(f"nothing to commit: the {sum(map(len, planned.values()))} planned samples of "
                                  f"{len(planned)} units were all rejected ({len(rejects)} staged rejects); a cache "
                                  "holds at least one sample")
    return placed, rejects, group_units(encoders) if encoders else None


class ManifestRows(Sequence[ManifestRow]):
    """The manifest rows of the placed rows, each made when it is asked for: the commit holds its placed rows anyway,
    and a list of every ManifestRow next to them doubled what a large manifest costs (docs/cache-format.md)."""

    def __init__(self, placed: Sequence[PlacedRow], shards: list[tuple[str, int, int]]):
        self._placed, self._shards = placed, shards
        self._starts = [start for _, start, _ in shards]

    def __len__(self) -> int:
        return sum(end - start for _, start, end in self._shards)

    def __iter__(self) -> Iterator[ManifestRow]:
        for shard_path, start, end in self._shards:
            for index in range(start, end):
                yield self._row(index, shard_path, start)

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        shard = bisect.bisect_right(self._starts, index) - 1
        if shard < 0 or not index < self._shards[shard][2]:
            raise IndexError(index)
        return self._row(index, self._shards[shard][0], self._shards[shard][1])

    def _row(self, index: int, shard_path: str, start: int) -> ManifestRow:
        staged = self._placed[index].row
        return ManifestRow(dataset_index=index, shard_path=shard_path, cache_row=index - start,
                           **{name: getattr(staged, name) for name in _STAGED_FIELDS})


_STAGED_FIELDS = tuple(f.name for f in dataclasses.fields(StagedRow))


def _repeated_ids(paths: list[Path], id_hashes: array.array) -> list[str]:
    """The sample_ids staged more than once, sorted. Only a 64-bit hash per row was kept; the rows whose hashes
    repeat (a repeated id, or very rarely two ids of one hash) are read again and compared."""
    hashes, counts = np.unique(np.frombuffer(id_hashes, dtype=np.int64), return_counts=True)
    repeated = set(hashes[counts > 1].tolist())
    if not repeated:
        return []
    seen: dict[str, int] = {}
    for path in paths:
        for row in read_staged_rows(path):
            if hash(row.sample_id) in repeated:
                seen[row.sample_id] = seen.get(row.sample_id, 0) + 1
    return sorted(sample_id for sample_id, count in seen.items() if count > 1)


def manifest_rows(placed: Sequence[PlacedRow], shards: list[tuple[str, int, int]]) -> ManifestRows:
    """The manifest rows, in dataset_index order, of rows placed in these shards (made one at a time)."""
    return ManifestRows(placed, shards)


def planned_count(planned: Planned, plan_rejects: list[Reject]) -> int:
    """Every candidate of the plan: the samples of its units and those the plan itself rejected."""
    return sum(len(sources) for sources in planned.values()) + len(plan_rejects)


def ordered_rejects(plan_rejects: list[Reject], unit_rejects: list[Reject]) -> list[Reject]:
    # Plan rejects have no place in the plan's order yet, so they come first, by sample_id.
    return sorted(plan_rejects, key=lambda r: r.sample_id) + sorted(unit_rejects,
                                                                   key=lambda r: (r.source_index, r.sample_id))
