"""The commit writes manifest.jsonl and manifest.parquet a block of rows at a time; the bytes must be those of the
whole manifest written at once: the lines json.dumps makes, and pq.write_table of one table whose columns pa.array
made from every row (pass-through types inferred over the whole column, one chunk per column)."""

from __future__ import annotations

import dataclasses
import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers.fake_rows import build_cache
from latentforge.cache.checksums import write_sha256sums
from latentforge.cache.rows import ManifestRow, read_manifest, write_manifest
from latentforge.sinks.hdf5 import manifest_checks, manifest_row_group
from latentforge.sinks.hdf5 import manifest_table as table_module
from latentforge.sinks.hdf5.integrity import verify_integrity
from latentforge.sinks.hdf5.manifest_table import write_manifest_table


def make_rows(n: int) -> list[ManifestRow]:
    rng = random.Random(n)
    rows = []
    for i in range(n):
        extra = {"objects": i % 7, "mixed": i if i < n // 2 else i + 0.5, "late": None if i < n - 3 else "x",
                 "listy": [1, 2] if i % 50 == 0 else 3}
        provenance = {"frame_indices": list(range(5)), "timestamps": [f / 24 for f in range(5)],
                      "source_fps": 24.0 if i % 5 else None, "source_size": [160, 96], "rotation": 0}
        if i > n // 3:
            provenance["quality"] = {"motion": rng.random(), "brightness": 0.5}
        rows.append(ManifestRow(i, 2 * i, f"clip{i:05d}", f"shards/part-{i // 100:05d}.h5", i % 100,
                                f"a prompt {rng.random()} é\u2028", bool(i % 2), f"v/{i}.mp4", i // 16, i % 4,
                                provenance, extra, unknown_token_fraction=round(rng.random(), 4) if i % 2 else None))
    return rows


def reference_table(rows: list[ManifestRow]) -> pa.Table:
    """manifest.parquet's table as the format defines it, every column made at once from all rows."""
    def whole(values, kind=None):
        return pa.array(values, type=kind)

    fixed = {
        "dataset_index": whole([r.dataset_index for r in rows], pa.int64()),
        "source_index": whole([r.source_index for r in rows], pa.int64()),
        "sample_id": whole([r.sample_id for r in rows], pa.string()),
        "shard_path": whole([r.shard_path for r in rows], pa.string()),
        "cache_row": whole([r.cache_row for r in rows], pa.int64()),
        "prompt": whole([r.prompt for r in rows], pa.string()),
        "prompt_truncated": whole([r.prompt_truncated for r in rows], pa.bool_()),
        "source_path": whole([r.source_path for r in rows], pa.string()),
        "unit": whole([r.unit for r in rows], pa.int64()),
        "batch": whole([r.batch for r in rows], pa.int64()),
        "num_frames": whole([len(r.provenance["frame_indices"]) for r in rows], pa.int64()),
        "source_fps": whole([r.provenance.get("source_fps") for r in rows], pa.float64()),
        "source_width": whole([r.provenance["source_size"][0] for r in rows], pa.int64()),
        "source_height": whole([r.provenance["source_size"][1] for r in rows], pa.int64()),
        "provenance": whole([json.dumps(r.provenance, ensure_ascii=False, separators=(",", ":")) for r in rows],
                            pa.string()),
        "extra": whole([json.dumps(r.extra, ensure_ascii=False, separators=(",", ":")) for r in rows], pa.string()),
    }
    if any(r.unknown_token_fraction is not None for r in rows):
        fixed["unknown_token_fraction"] = whole([r.unknown_token_fraction for r in rows], pa.float64())
    if any("quality" in r.provenance for r in rows):
        for name in ("motion", "black_fraction", "brightness"):
            fixed[name] = whole([(r.provenance.get("quality") or {}).get(name) for r in rows], pa.float64())
    if rows:
        fixed["objects"] = whole([r.extra["objects"] for r in rows])
        fixed["mixed"] = whole([r.extra["mixed"] for r in rows])  # ints then floats: double over the whole column
        fixed["late"] = whole([r.extra["late"] for r in rows])  # "listy" mixes lists and ints: no column
    return pa.table(fixed)


@pytest.mark.parametrize("count, chunk, group", [(0, 64, 128), (1, 64, 128), (700, 64, 128), (700, 64, 1 << 20)])
def test_streamed_files_have_the_bytes_of_the_whole_manifest(tmp_path, monkeypatch, count, chunk, group):
    monkeypatch.setattr(table_module, "CHUNK_ROWS", chunk)  # small, so a few hundred rows make many chunks/groups
    monkeypatch.setattr(table_module, "_ROW_GROUP_ROWS", group)
    rows = make_rows(count)
    write_manifest(tmp_path, iter(rows))
    write_manifest_table(tmp_path, rows)
    lines = "".join(json.dumps(r.to_json(), ensure_ascii=False, separators=(",", ":")) + "\n" for r in rows)
    assert (tmp_path / "manifest.jsonl").read_bytes() == lines.encode("utf-8")
    want = tmp_path / "want.parquet"
    table = reference_table(rows)
    pq.write_table(table, want, compression="zstd", row_group_size=min(group, max(count, 1)) if count else None)
    assert (tmp_path / "manifest.parquet").read_bytes() == want.read_bytes()
    assert pq.ParquetFile(want).metadata.num_row_groups == (-(-count // group) if count else 1)


@pytest.mark.parametrize("limit", [2**31 - 1, 20_000])
def test_a_row_group_is_one_chunk_a_column_up_to_one_arrays_limit(monkeypatch, limit):
    """The writer's pages follow the chunks it is given, so a row group's columns are one chunk each (the values of
    the whole table, nulls included); past the bytes one string array holds (2 GiB; here 20 KB), a text column keeps
    the chunks its rows were made in."""
    monkeypatch.setattr(table_module, "CHUNK_ROWS", 64)
    monkeypatch.setattr(manifest_row_group, "MAX_TEXT_BYTES", limit)
    rows = make_rows(700)
    columns = table_module.manifest_columns(rows)
    group = manifest_row_group.RowGroup(columns.schema)
    for batch in table_module.manifest_batches(rows, columns):
        group.append(batch)
    got, want = group.table(), reference_table(rows)
    assert got.equals(want) and want.column("late").null_count == 697
    past = {name for name in want.column_names if want.column(name).nbytes > limit}
    assert past == (set() if limit > 2**20 else {"prompt", "provenance", "extra"})
    for name in got.column_names:
        lengths = [len(chunk) for chunk in got.column(name).chunks]
        assert lengths == ([64] * 10 + [60] if name in past else [700]), name


def test_verify_reads_lines_split_at_newlines_only(tmp_path):
    """A caption may hold U+2028 (JSON leaves it raw): the manifest's lines end at "\\n" alone, as jq reads them."""
    root = tmp_path / "cache"
    build_cache(root)
    rows = [dataclasses.replace(row, prompt=row.prompt + " \u2028 next") for row in read_manifest(root)]
    write_manifest(root, rows)
    write_manifest_table(root, rows)
    write_sha256sums(root)
    assert len((root / "manifest.jsonl").read_bytes().split(b"\n")) == len(rows) + 1
    report = verify_integrity(root)
    assert report.ok, report.failures


@pytest.mark.parametrize("colliding", [False, True])
def test_verify_names_a_repeated_sample_id_once_and_only_it(tmp_path, monkeypatch, colliding):
    """verify keeps a hash per sample_id; ids whose hashes meet are compared for real (every hash equal: no false
    failure, the repeated id still named)."""
    if colliding:
        monkeypatch.setattr(manifest_checks, "hash", lambda value: 7, raising=False)
    root = tmp_path / "cache"
    build_cache(root)
    rows = list(read_manifest(root))
    rows[3] = dataclasses.replace(rows[3], sample_id=rows[1].sample_id)
    write_manifest(root, rows)
    write_manifest_table(root, rows)
    write_sha256sums(root)
    failures = [f for f in verify_integrity(root).failures if f.name == "manifest"]
    assert [f.detail for f in failures] == [f"dataset_index 3: sample_id {rows[1].sample_id!r} appears twice"]
