"""Per-frame side streams (docs/modalities.md): a table column naming a .parquet (time + value columns) or a .npy
(with <stem>.times.npy) per row, cut to each window by presentation time and stored beside the latent. Whole builds
of the demo world; the expected rows come from the frames' times read with PyAV and numpy's searchsorted."""

from __future__ import annotations

import dataclasses
import json

import av
import h5py
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pa_parquet
import pytest

from helpers.builds import build_quietly, read_manifest, tiny_config, tiny_world, write_table
from latentforge import LatentCacheDataset, StreamingLatentDataset, verify
from latentforge.errors import ConfigError


def frame_times(video) -> np.ndarray:
    with av.open(str(video)) as container:
        return np.array(sorted(float(frame.time) for frame in container.decode(video=0)))


def expected_rows(row_times: np.ndarray, frame_times_: np.ndarray) -> np.ndarray:
    """The last row at or before each frame's time (seconds from the first frame), 1 ms of slack."""
    return np.searchsorted(row_times, frame_times_ - frame_times_[0] + 1e-3, side="right") - 1


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    folder = tmp_path_factory.mktemp("side")
    rows = tiny_world(folder, clips=3)[:2]
    table_rows, expected = [], {}
    for number, row in enumerate(rows):
        video = folder / row["video"]
        times = frame_times(video)
        rate = 10.0  # 10 rows a second beside a 24 fps video: rows repeat
        count = int(times[-1] * rate) + 2 if number == 0 else 2  # the second clip's pose ends at 0.1 s
        pose_times = np.arange(count) / rate
        pose = np.stack([pose_times * 100 + k for k in range(3)], axis=1)
        pa_parquet.write_table(pa.table({"time": pose_times, "x": pose[:, 0], "y": pose[:, 1], "z": pose[:, 2]}),
                               folder / f"pose{number}.parquet")
        act_times = np.arange(len(times) + 4) / 30.0
        act = np.stack([np.arange(len(act_times)) * 2.0, np.arange(len(act_times)) * -1.0], axis=1).astype(np.float64)
        np.save(folder / f"act{number}.npy", act)
        np.save(folder / f"act{number}.times.npy", act_times)
        window = times[:9]
        expected[row["id"]] = {"pose": pose[expected_rows(pose_times, window)].astype(np.float32),
                               "act": act[expected_rows(act_times, window)].astype(np.float32)}
        table_rows.append({**row, "pose": f"pose{number}.parquet", "act": f"act{number}.npy"})
    table = write_table(table_rows, folder / "table.csv")
    return folder, table, expected, [r["id"] for r in rows]


SIDE = ("dataset.side_columns=pose,act", "dataset.side_dims=3,2")


def test_side_streams_are_stored_at_the_window_times_and_a_short_one_rejects(world, tmp_path):
    folder, table, expected, ids = world
    config = tiny_config(table, tmp_path / "cache", modalities=("rgb",), overrides=SIDE)
    config.run.max_reject_fraction = 0.9
    result = build_quietly(config)
    assert result.num_samples == 1
    root = tmp_path / "cache"
    rejects = [json.loads(line) for line in (root / "rejects.jsonl").read_text().splitlines()]
    assert [(r["sample_id"], r["reason"]) for r in rejects] == [(ids[1], "side_stream_short")]
    assert "side stream 'pose'" in rejects[0]["detail"] and "covers 0.000..0.250 s" in rejects[0]["detail"]
    [row] = read_manifest(root)
    with h5py.File(root / row["shard_path"]) as shard:
        for name, dim in (("pose", 3), ("act", 2)):
            assert shard[name].dtype == np.float32 and shard[name].shape == (1, 9, dim)
            assert np.array_equal(shard[name][row["cache_row"]], expected[row["sample_id"]][name])
    item = LatentCacheDataset(root)[0]
    assert np.array_equal(np.asarray(item["pose"]), expected[ids[0]]["pose"])
    recorded = json.loads((root / "cache_config.json").read_text())["side_streams"]
    assert [(s["name"], s["shape"], s["dtype"]) for s in recorded] == [("pose", [9, 3], "float32"),
                                                                     ("act", [9, 2], "float32")]
    assert row["provenance"]["side"]["pose"]["rows"] == expected_rows(
        np.arange(10) / 10.0, frame_times(folder / row["source_path"])[:9]).tolist()


def test_side_stream_keys_are_checked(world, tmp_path):
    _, table, _, _ = world
    with pytest.raises(ConfigError, match="side_dims"):
        tiny_config(table, tmp_path / "c", modalities=("rgb",), overrides=("dataset.side_columns=pose",))
    with pytest.raises(ConfigError, match="cannot name a side stream"):
        tiny_config(table, tmp_path / "c", modalities=("rgb",),
                    overrides=("dataset.side_columns=prompt", "dataset.side_dims=1"))
    config = tiny_config(table, tmp_path / "c", modalities=("rgb",))
    assert "side_columns" not in dataclasses.asdict(config.dataset.options) or \
        config.dataset.options.side_columns == []


def test_webdataset_sink_stores_them_and_verify_catches_a_tampered_row(world, tmp_path):
    folder, table, expected, ids = world
    root = tmp_path / "wds"
    config = tiny_config(table, root, modalities=("rgb",),
                         overrides=(*SIDE, "output.sink=webdataset", f"output.staging_dir={tmp_path / 'stage'}"))
    config.run.max_reject_fraction = 0.9
    build_quietly(config)
    assert verify(str(root)).ok
    [item] = list(StreamingLatentDataset(str(root)))
    assert np.array_equal(np.asarray(item["act"]), expected[ids[0]]["act"])

    hdf5 = tmp_path / "h5"
    config = tiny_config(table, hdf5, modalities=("rgb",), overrides=SIDE)
    config.run.max_reject_fraction = 0.9
    build_quietly(config)
    [row] = read_manifest(hdf5)
    with h5py.File(hdf5 / row["shard_path"], "r+") as shard:
        shard["pose"][0, 4, 1] = np.nan
    report = verify(str(hdf5))
    assert not report.ok
    assert "pose holds NaN or Inf" in {c.name: c.detail for c in report.failures}["conditioning_rows"]
