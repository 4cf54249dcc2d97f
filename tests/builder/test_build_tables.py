"""The same samples listed as CSV, JSONL and Parquet build byte-identical caches (issue 2, "Tables")."""

from __future__ import annotations

import json

from helpers.builds import build_quietly, checksummed_bytes, read_manifest, tiny_config, tiny_world, write_table
from latentforge.sinks.hdf5.integrity import verify_integrity


def test_csv_jsonl_and_parquet_give_byte_identical_caches(tmp_path):
    world = tmp_path / "world"
    rows = tiny_world(world, clips=4)
    # Cells a CSV writer must quote, non-ASCII text, and an absent caption (a reject in every format).
    rows[0]["caption"] = 'a "quoted", comma\'d caption — naïve café'
    rows[1]["caption"] = None
    caches = {}
    for suffix in (".csv", ".jsonl", ".parquet"):
        table = write_table(rows, world / f"samples{suffix}")
        root = tmp_path / f"cache{suffix.replace('.', '_')}"
        build_quietly(tiny_config(table, root))
        assert verify_integrity(root).ok
        caches[suffix] = checksummed_bytes(root)

    csv_cache = caches[".csv"]
    assert any(name.startswith("shards/part-") for name in csv_cache)
    assert {"manifest.jsonl", "rejects.jsonl", "cache_config.json", "README.md"} <= set(csv_cache)
    for suffix in (".jsonl", ".parquet"):
        assert sorted(caches[suffix]) == sorted(csv_cache), suffix
        different = [name for name in csv_cache if caches[suffix][name] != csv_cache[name]]
        assert different == [], f"{suffix} differs from .csv in {different}"

    # The shared result is the right one: the quoted caption survived, ints stayed ints, and the clip without
    # a caption and the 6-frame clip are the rejects.
    manifest = read_manifest(tmp_path / "cache_csv")
    assert [row["sample_id"] for row in manifest] == ["clip_000", "clip_002"]
    assert manifest[0]["prompt"] == rows[0]["caption"]
    assert [row["extra"]["objects"] for row in manifest] == [rows[0]["objects"], rows[2]["objects"]]
    rejects = [json.loads(line) for line in csv_cache["rejects.jsonl"].decode().splitlines()]
    assert {(r["sample_id"], r["reason"]) for r in rejects} == {("clip_001", "missing_caption"),
                                                                ("clip_003", "too_short")}
