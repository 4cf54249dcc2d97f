"""Where a WebDataset commit cuts its tars, and which tars of the cache it replaces stay as they are.

A tar is closed once its samples' arrays reach shard_bytes (layout.cut_shards), so every tar but a cache's last was
closed by size, and the same samples followed by more are cut at the same places again. The new layout therefore
takes the ranges of the root's tars, all but its last, as long as the new commit places there, manifest line for
manifest line, the rows they hold; the rest is cut afresh from there, as a fresh build cuts it.

A shard of the new layout that the root holds under the same index with the same rows keeps its tar, name and bytes,
while the tar is still what its commit wrote: every full tar before the new samples of an --extend, and the old last
one when it was full. Each KEY.json member names its tar, so a kept tar keeps the shard count of the commit that
wrote it in its name; renaming it would change every sample in it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ...cache.layout import ShardSchema
from ...io import canonical_json
from ...staging.gather import manifest_rows
from ...staging.placed_rows import PlacedRows
from ...staging.staged_units import is_retired, open_staged_unit
from .layout import cut_shards, tar_shard_path
from .published_tars import PublishedTars

Shards = list[tuple[str, int, int]]  # (path, start, end) of each shard, in order


def plan_shards(placed: PlacedRows, schema: ShardSchema, shard_bytes: int, published: PublishedTars | None
                ) -> tuple[Shards, dict[str, str]]:
    """The new cache's shards and {path: SHA-256} of the root's tars among them, kept as they are. `published`: the
    cache a local root holds (None at a store URL, whose commit keeps objects by their bytes instead)."""
    adopted: Shards = []
    for rel, start, end in published.shards[:-1] if published is not None else []:
        if start != (adopted[-1][2] if adopted else 0) or end > len(placed) or \
                not _same_rows(placed, (rel, start, end), published):
            break
        adopted.append((rel, start, end))
    first = adopted[-1][2] if adopted else 0
    if published is not None:
        published.keep(rel for rel, _, _ in adopted if published.trusted(rel))
    cut = cut_shards(_sample_bytes(schema, _text_lengths(placed, first, published)), shard_bytes)
    ranges = [(start, end) for _, start, end in adopted] + [(first + start, first + end) for start, end in cut]
    shards: Shards = []
    kept: dict[str, str] = {}
    same = set(adopted)
    for k, (start, end) in enumerate(ranges):
        old = published.name(k, start, end) if published is not None else None
        digest = published.trusted(old) if old is not None else None
        if digest is not None and ((old, start, end) in same or _same_rows(placed, (old, start, end), published)):
            kept[old] = digest
            shards.append((old, start, end))
        else:
            shards.append((tar_shard_path(k, len(ranges), start, end), start, end))
    return shards, kept


def _same_rows(placed: PlacedRows, shard: tuple[str, int, int], published: PublishedTars) -> bool:
    """Does the new manifest give the rows of `shard`, named in it, the lines the root's manifest gives them?"""
    return published.same_lines(shard[1], (canonical_json(row.to_json()) for row in manifest_rows(placed, [shard])))


def _sample_bytes(schema: ShardSchema, lengths: list[int]) -> list[int]:
    """What each sample's arrays add to its tar: latent, conditioning streams and its `length` text rows."""
    text_row = 0 if schema.text_dim is None else schema.text_dim * np.dtype(schema.storage_dtype).itemsize
    fixed = int(np.prod(schema.latent_shape)) * np.dtype(schema.latent_dtype or schema.storage_dtype).itemsize
    fixed += sum(int(np.prod(stream.shape)) * np.dtype(stream.dtype).itemsize for stream in schema.conditioning)
    return [fixed + length * text_row for length in lengths]


def _text_lengths(placed: PlacedRows, start: int, published: PublishedTars | None) -> list[int]:
    """The text length of each placed row from `start` on (0 without text): a staged unit's read once, a retired
    unit's row by row from the tar that holds it."""
    wanted: dict[Path, list[int]] = {}
    for index in range(start, len(placed)):
        wanted.setdefault(placed.unit_path_at(index), []).append(int(placed.position[index]))
    found: dict[Path, dict[int, int]] = {}
    for path, positions in wanted.items():
        with open_staged_unit(path, published) as staged:
            lengths = staged.text_lengths
            if lengths is None:
                found[path] = dict.fromkeys(positions, 0)
            elif is_retired(path):
                found[path] = {position: int(lengths[position]) for position in positions}
            else:
                every = lengths[()]
                found[path] = {position: int(every[position]) for position in positions}
    return [found[placed.unit_path_at(index)][int(placed.position[index])] for index in range(start, len(placed))]
