"""The HDF5 commit: staged units -> shards, empty_prompt.h5, rejects, cache_config, manifest, README, SHA256SUMS,
an integrity verify, and only then _CACHE_COMPLETE (docs/cache-format.md).

The new cache is written whole beside the one at the root, into ROOT/build/next, and swapped in once verified
(cache/generation_swap.py): a cache the root holds stays complete and readable until the new one replaces it.

Everything checksummed is a function of the staged rows and the config alone, so committing the same
staged input twice gives byte-identical files whatever the unit split or the order units finished in.

A shard whose rows an earlier commit of the root already wrote, all of them and in the same places (every full shard
before the new rows of an `--extend`), is therefore not written again: the new shard name is a hard link to the old
file (the name carries the shard count), whose bytes and mtime stay as they were; its SHA-256 is the one recorded at
its commit, and the commit's own verify reads only its metadata and source_index. The old names go with the other
stale shards when the new cache is swapped in.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from ...cache.check_report import VerifyReport
from ...cache.checksums import write_sha256sums
from ...cache.config_file import CacheConfig
from ...cache.generation_swap import finish_swap, next_generation, swap_in
from ...cache.layout import (
    COMPLETE_MARKER,
    EMPTY_PROMPT,
    README,
    SHARD_DIGESTS,
    SHARD_STATS,
    SHARDS_DIR,
    SOURCE_INDEX_DATASET,
    TMP_LEFTOVER,
    ShardSchema,
)
from ...cache.readme import render_cache_readme
from ...cache.rows import write_manifest, write_rejects
from ...cache.text_rows import PADDED, TRIMMED, trim_rows, write_trimmed
from ...errors import CacheIntegrityError
from ...hashing import sha256_file
from ...io import canonical_json, write_text_atomic
from ...records import Reject
from ...staging.committed_rows import CommittedRows
from ...staging.gather import Planned, gather_staged, manifest_rows, ordered_rejects, planned_count
from ...staging.placed_rows import PlacedRows
from ...staging.staged_units import OpenStagedUnit, is_retired, open_staged_unit
from ...testing.fault_points import fault_point
from .byte_stable import BlockFiller, write_empty_prompt, write_h5_atomic
from .integrity import verify_integrity
from .manifest_table import write_manifest_table

# Rows copied per HDF5 write: bounds commit memory far below one shard (a 3000-row perception shard is 46 GB).
_BLOCK_BYTES = 256 << 20


@dataclass(frozen=True)
class CommitResult:
    root: Path
    num_samples: int
    num_shards: int
    rejects: list[Reject]
    shard_paths: list[str]  # relative to root
    report: VerifyReport


def _fill_shard(schema: ShardSchema, rows: PlacedRows, units: dict[Path, OpenStagedUnit]) -> BlockFiller:
    def fill(datasets: dict[str, h5py.Dataset], start: int, stop: int) -> None:
        # Copy runs of rows that sit next to each other in one staged unit with one slice each.
        i = start
        while i < stop:
            unit, position = rows.unit_of[i], int(rows.position[i])
            j = i + 1
            while j < stop and rows.unit_of[j] == unit and rows.position[j] == position + j - i:
                j += 1
            path = rows.unit_path_at(i)
            staged = units[path]
            src = slice(position, position + j - i)
            datasets[schema.latent_dataset][i:j] = staged.latents[src]
            for stream in schema.conditioning:
                datasets[stream.name][i:j] = staged.conditioning[stream.name][src]
            if schema.text_prefix is not None:
                lengths = staged.text_lengths[src]
                if lengths.min() < 0 or lengths.max() > schema.max_length:
                    raise CacheIntegrityError(f"staged unit {path}: text lengths {lengths.tolist()} "
                                              f"outside [0, {schema.max_length}]")
                if schema.text_storage == TRIMMED:
                    write_trimmed(datasets[schema.embeddings_dataset], i,
                                  trim_rows(staged.text_embeddings[src], lengths))
                else:
                    datasets[schema.embeddings_dataset][i:j] = staged.text_embeddings[src]
                datasets[schema.length_dataset][i:j] = lengths.astype(np.uint16)
            i = j
        datasets[SOURCE_INDEX_DATASET][start:stop] = rows.source_index[start:stop]

    return fill


def _committed_shard(committed: CommittedRows | None, placed: PlacedRows, start: int, end: int) -> str | None:
    """The trusted shard that holds exactly the rows [start, end) of retired units, each at its place here."""
    if committed is None or not is_retired(placed.unit_path_at(start)):
        return None
    first = committed.place(int(placed.source_index[start]))
    if first is None or first[1] != 0 or committed.lengths[first[0]] != end - start:
        return None
    same = all(is_retired(placed.unit_path_at(index)) and committed.place(int(placed.source_index[index]))
               == (first[0], index - start) for index in range(start, end))
    return first[0] if same else None


def _write_shards(root: Path, folder: Path, schema: ShardSchema, placed: PlacedRows, shards: list[tuple[str, int, int]],
                  committed: CommittedRows | None) -> tuple[list[str], dict[str, str]]:
    """Every shard of the layout (relative paths), written into `folder`, and {path: SHA-256} of those an earlier
    commit wrote already (hard links there to the root's files)."""
    padded = dataclasses.replace(schema, text_storage=PADDED)  # a trimmed row is at most as large
    row_bytes = sum(np.dtype(d).itemsize * int(np.prod(s[1:])) for d, s in padded.dataset_specs(1).values())
    block_rows = max(1, _BLOCK_BYTES // row_bytes)
    reused: dict[str, str] = {}
    for rel, start, end in shards:
        old = _committed_shard(committed, placed, start, end)
        if old is not None:
            os.link(root / old, folder / rel)
            reused[rel] = committed.digests[old]  # type: ignore[union-attr]
            continue
        rows = placed[start:end]
        with contextlib.ExitStack() as stack:
            units = {p: stack.enter_context(open_staged_unit(p, committed)) for p in rows.units()}
            write_h5_atomic(folder / rel, schema.dataset_specs(end - start), block_rows,
                            _fill_shard(schema, rows, units))
        fault_point("commit")  # test-only: a kill between shards
    return [rel for rel, _, _ in shards], reused


def _read_digests(records: Path | None) -> dict[str, str]:
    try:
        data = json.loads((records / SHARD_DIGESTS).read_text(encoding="utf-8")) if records is not None else {}
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, str)} if isinstance(data, dict) else {}


def _read_stats(records: Path | None) -> dict[str, list[int]]:
    try:
        data = json.loads((records / SHARD_STATS).read_text(encoding="utf-8")) if records is not None else {}
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _record_digests(records: Path | None, folder: Path, digests: dict[str, str]) -> None:
    """The SHA-256 of each shard, then the size and mtime each shard of them has now in `folder`."""
    if records is not None:
        records.mkdir(parents=True, exist_ok=True)
        write_text_atomic(records / SHARD_DIGESTS, canonical_json(dict(sorted(digests.items()))) + "\n")
        stats = {}
        for name in sorted(digests):
            with contextlib.suppress(OSError):
                found = (folder / SHARDS_DIR / name).stat()
                stats[name] = [found.st_size, found.st_mtime_ns]
        write_text_atomic(records / SHARD_STATS, canonical_json(stats) + "\n")


def commit_cache(
    root: Path,
    unit_paths: list[Path],
    plan_rejects: list[Reject],
    cache_config: CacheConfig,
    empty_prompt: tuple[np.ndarray, np.ndarray] | None,
    readme_context: dict[str, Any],
    planned: Planned,
    allow_empty: bool = False,
    records: Path | None = None,
    publish: bool = True,
) -> CommitResult:
    """Turn staged units into a complete, checksummed, verified cache under `root`; the counts of
    `cache_config` are filled in here. `planned` ({unit: source_index of its samples}) is the plan the staged
    units must cover exactly (gather_staged). `records`: the build's records folder, where the SHA-256 of every shard
    this commit writes is kept, so a later commit may copy the rows of units retired after it (committed_rows.py).
    `publish`: False leaves the verified cache in ROOT/build/next (a bucket its bucketed root's commit moves in)."""
    root = Path(root)
    finish_swap(root)  # a swap a kill cut short: the root holds one whole cache again
    for leftover in root.glob(".*.tmp*"):  # tmp siblings of a commit that was killed; they would be checksummed
        if TMP_LEFTOVER.match(leftover.name) and leftover.is_file():
            leftover.unlink()
    schema = cache_config.shard_schema()
    if empty_prompt is not None and schema.text_prefix is None:
        raise CacheIntegrityError("an empty prompt was given but the cache has no text datasets")
    digests = _read_digests(records)
    with contextlib.closing(CommittedRows(root, schema, digests, _read_stats(records))) \
            if any(map(is_retired, unit_paths)) else \
            contextlib.nullcontext() as committed:
        return _commit(root, unit_paths, plan_rejects, cache_config, schema, empty_prompt, readme_context, planned,
                       allow_empty, committed, (records, digests), publish)


def _commit(root: Path, unit_paths: list[Path], plan_rejects: list[Reject], cache_config: CacheConfig,
            schema: ShardSchema, empty_prompt: tuple[np.ndarray, np.ndarray] | None, readme_context: dict[str, Any],
            planned: Planned, allow_empty: bool, committed: CommittedRows | None,
            trusted: tuple[Path | None, dict[str, str]], publish: bool) -> CommitResult:
    records, digests = trusted
    placed, unit_rejects, encoded_by = gather_staged(schema, unit_paths, planned, allow_empty, committed)
    shards = schema.shard_paths(len(placed))
    rejects = ordered_rejects(plan_rejects, unit_rejects)
    config = cache_config.committed(len(placed), len(shards), encoded_by, planned_count(planned, plan_rejects),
                                    len(rejects))
    readme = render_cache_readme(config, readme_context)
    folder = next_generation(root)
    written, reused = _write_shards(root, folder, schema, placed, shards, committed)
    new = {Path(rel).name: reused.get(rel) or sha256_file(folder / rel) for rel in written}
    _record_digests(records, folder, {**digests, **new})  # before the shards they replace go
    if empty_prompt is not None:
        write_empty_prompt(folder / EMPTY_PROMPT, schema, *empty_prompt)
    write_rejects(folder, rejects)
    config.write(folder)
    manifest = manifest_rows(placed, shards)
    write_manifest(folder, manifest)
    write_manifest_table(folder, manifest)
    fault_point("manifest")
    write_text_atomic(folder / README, readme)
    write_sha256sums(folder, known=reused)
    fault_point("sha256sums")
    report = verify_integrity(folder, require_complete=False, trusted=reused)
    if not report.ok:
        failures = "; ".join(f"{c.name}: {c.detail}" for c in report.failures[:10])
        raise CacheIntegrityError(f"{root}: the committed cache fails its integrity verify: {failures}")
    stamp = {"completed_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
             "num_samples": len(placed), "num_shards": len(written)}
    fault_point("marker")
    write_text_atomic(folder / COMPLETE_MARKER, canonical_json(stamp) + "\n")
    if publish:
        swap_in(root)
        _record_digests(records, root, new)
    return CommitResult(root, len(placed), len(written), rejects, written, report)
