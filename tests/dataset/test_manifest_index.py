"""The Dataset's manifest index read from manifest.parquet's columns equals the one parsed from manifest.jsonl's
lines (json module), row by row, over several read batches; a broken manifest is refused with the same message."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from latentforge.cache.rows import ManifestRow, write_manifest
from latentforge.errors import CacheIntegrityError
from latentforge.sinks.hdf5 import manifest_index
from latentforge.sinks.hdf5.manifest_index import read_manifest_index
from latentforge.sinks.hdf5.manifest_table import write_manifest_table


def rows(n: int) -> list[ManifestRow]:
    return [ManifestRow(i, 3 * i + 1, f"clip_é{i:04d}", f"shards/part-{i // 7:05d}.h5", i % 7,
                        f"prompt {i} ✓" * (i % 3), False, f"videos/{i}.mp4", i // 4, i % 2,
                        {"frame_indices": [0, 1], "source_fps": None if i % 5 == 0 else 24.0 + i}, {})
            for i in range(n)]


def write(root, manifest: list[ManifestRow]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    write_manifest(root, manifest)
    write_manifest_table(root, manifest)


def test_the_table_index_equals_the_lines(tmp_path, monkeypatch):
    monkeypatch.setattr(manifest_index, "_BATCH_ROWS", 8)  # 50 rows: seven batches
    root = tmp_path / "cache"
    write(root, rows(50))
    from_table = read_manifest_index(root, 50)
    (root / "manifest.parquet").unlink()
    from_lines = read_manifest_index(root, 50)
    assert from_table.shard_paths == from_lines.shard_paths
    for field in ("shard_of", "cache_row", "source_index"):
        assert getattr(from_table, field).dtype == getattr(from_lines, field).dtype
        assert getattr(from_table, field).tolist() == getattr(from_lines, field).tolist()
    want = [json.loads(line) for line in (root / "manifest.jsonl").read_text(encoding="utf-8").splitlines()]
    for i, row in enumerate(want):
        assert from_table.sample_id[i] == row["sample_id"] and from_table.prompt[i] == row["prompt"]
        assert from_table.source_path[i] == row["source_path"]
        fps = row["provenance"]["source_fps"]
        assert math.isnan(from_table.source_fps[i]) if fps is None else from_table.source_fps[i] == fps
    assert len(from_table) == 50 and len(from_table.sample_id) == 50


@pytest.mark.parametrize("damage, message", [
    (lambda r: dataclasses.replace(r, dataset_index=9) if r.dataset_index == 3 else r,
     "line 4: dataset_index 9, expected 3"),
    (lambda r: dataclasses.replace(r, shard_path="../elsewhere.h5") if r.dataset_index == 5 else r,
     "line 6: shard_path '../elsewhere.h5' leaves the root"),
])
def test_a_broken_table_is_refused_as_the_lines_are(tmp_path, damage, message):
    root = tmp_path / "cache"
    write(root, [damage(row) for row in rows(10)])
    with pytest.raises(CacheIntegrityError, match=message):
        read_manifest_index(root, 10)
    (root / "manifest.parquet").unlink()
    with pytest.raises(CacheIntegrityError, match=message):
        read_manifest_index(root, 10)
    write(root, rows(10))
    with pytest.raises(CacheIntegrityError, match="has 10 rows but cache_config.json promises num_samples=11"):
        read_manifest_index(root, 11)
