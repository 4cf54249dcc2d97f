"""Deep verify re-reads the per-frame side streams of its spot samples: a cache whose side stream file is changed
after the build fails, naming the sample and the stream; an unchanged one passes (docs/verify.md). The files are
written with pyarrow and numpy; the build is a tiny haar build of the demo world."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pa_parquet

from helpers.builds import build_quietly, read_manifest, tiny_config, tiny_world, write_table
from latentforge.verification.deep import verify_deep

SIDE = ("dataset.side_columns=pose,act", "dataset.side_dims=3,2")


def _pose(path, times: np.ndarray, offset: float = 0.0) -> None:
    values = {axis: times * 100 + k + offset for k, axis in enumerate("xyz")}
    pa_parquet.write_table(pa.table({"time": times, **values}), path)


def test_deep_verify_compares_side_streams_with_their_files(tmp_path):
    folder = tmp_path / "world"
    rows = tiny_world(folder, clips=3)[:2]  # the last clip is too short for a window
    table_rows = []
    for number, row in enumerate(rows):
        _pose(folder / f"pose{number}.parquet", np.arange(40) / 10.0)
        np.save(folder / f"act{number}.npy", np.stack([np.arange(80) * 2.0, np.arange(80) * -1.0], axis=1))
        np.save(folder / f"act{number}.times.npy", np.arange(80) / 30.0)
        table_rows.append({**row, "pose": f"pose{number}.parquet", "act": f"act{number}.npy"})
    table = write_table(table_rows, folder / "table.csv")
    root = tmp_path / "cache"
    build_quietly(tiny_config(table, root, modalities=("rgb",), overrides=SIDE))
    manifest = read_manifest(root)
    assert len(manifest) == 2

    report = verify_deep(root, spot=2)
    assert report.ok, [c.detail for c in report.failures]
    passed = {c.name: c for c in report.checks}["side_streams"]
    assert passed.ok and "pose, act" in passed.detail and "of 2 samples" in passed.detail

    # the second clip's pose changes after the build (same times, other values): that sample and stream fail
    changed = next(row for row in manifest if row["sample_id"] == rows[1]["id"])
    _pose(folder / "pose1.parquet", np.arange(40) / 10.0, offset=0.5)
    report = verify_deep(root, spot=2)
    assert not report.ok
    failures = [c for c in report.failures if c.name == "side_streams"]
    assert len(failures) == 1
    detail = failures[0].detail
    assert f"sample {changed['sample_id']!r}" in detail and "side stream 'pose'" in detail
    assert "pose1.parquet" in detail and "largest difference 0.5" in detail
    assert failures[0].dataset_index == changed["dataset_index"]
