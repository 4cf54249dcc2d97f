"""Readers: Cosmos folders and CSV/JSONL/Parquet tables become the same SourceEntry lists."""

from __future__ import annotations

import glob
import json
import os
import unicodedata

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pa_parquet
import pytest

from latentforge import registry
from latentforge.config import DatasetConfig
from latentforge.errors import ConfigError
from latentforge.readers.cosmos_dir import CosmosDirReader
from latentforge.readers.table import TableOptions, TableReader

NFC_NAME = unicodedata.normalize("NFC", "café")
NFD_NAME = unicodedata.normalize("NFD", "café")


def _touch(path, data=b"\x00\x00\x00\x18ftypmp42"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _cosmos_dir(root):
    for name in ("b.mp4", "a.mp4", "c.mp4", f"{NFD_NAME}.mp4"):
        _touch(root / "videos" / name)
    _touch(root / "videos" / "notes.txt")  # not a video: ignored
    (root / "videos" / "sub.mp4").mkdir()  # a folder with a video-like name: ignored
    (root / "metas").mkdir()
    (root / "metas" / "a.txt").write_text("  a red ball rolls\n\n", encoding="utf-8")
    (root / "metas" / "b.txt").write_text("", encoding="utf-8")
    (root / "metas" / f"{NFD_NAME}.txt").write_bytes("\ufeffcoffee".encode("utf-8"))
    return root


def test_registry_names_the_readers():
    assert registry.resolve("reader", "cosmos_dir") is CosmosDirReader
    assert registry.resolve("reader", "table") is TableReader


def test_cosmos_dir_lists_videos_with_captions(tmp_path):
    root = _cosmos_dir(tmp_path / "ds")
    entries = CosmosDirReader(DatasetConfig(reader="cosmos_dir", path=[str(root)])).entries()
    # reference listing: the stdlib glob Cosmos' own Dataset class uses (`videos/*.mp4`, files only)
    expected = sorted(p for p in glob.glob(str(root / "videos" / "*.mp4")) if os.path.isfile(p))
    assert sorted(e.video for e in entries) == sorted(os.path.abspath(p) for p in expected)
    by_key = {e.key: e for e in entries}
    assert set(by_key) == {"videos/a", "videos/b", "videos/c", f"videos/{NFC_NAME}"}
    assert by_key["videos/a"].caption == "a red ball rolls"
    assert by_key["videos/a"].video_rel == "videos/a.mp4"
    assert by_key["videos/b"].caption == ""  # empty file: empty caption, not missing
    assert by_key["videos/c"].caption is None  # no metas file
    nfd = by_key[f"videos/{NFC_NAME}"]
    assert nfd.video_rel == f"videos/{NFC_NAME}.mp4" and nfd.caption == "coffee"
    assert os.path.isfile(nfd.video)  # keeps the on-disk (NFD) name so it still opens


def test_cosmos_dir_refuses_bad_folders(tmp_path):
    with pytest.raises(ConfigError, match="no videos/ folder"):
        CosmosDirReader(DatasetConfig(path=[str(tmp_path)])).entries()
    _touch(tmp_path / "videos" / "x.mp4")
    (tmp_path / "metas").mkdir()
    (tmp_path / "metas" / "x.txt").write_bytes(b"\xff\xfe caption")
    with pytest.raises(ConfigError, match=r"x\.txt is not valid UTF-8"):
        CosmosDirReader(DatasetConfig(path=[str(tmp_path)])).entries()


ROWS = [
    {"id": "007", "video": "clips/a.mp4", "caption": "  a cat ", "views": 3, "score": 1.5, "ok": True,
     "day": "2024-01-02"},
    {"id": "8", "video": "clips/b.mp4", "caption": None, "views": 40, "score": 0.25, "ok": False,
     "day": "2024-01-03"},
    {"id": "9", "video": f"clips/{NFD_NAME}.mp4", "caption": "", "views": -1, "score": None, "ok": None,
     "day": None},
    {"id": "10", "video": "clips/d.mp4", "caption": "NA", "views": 0, "score": 2.75, "ok": True,
     "day": "2024-01-05"},
]


def _write_tables(folder):
    folder.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(ROWS)
    pa_csv.write_csv(table, folder / "t.csv")
    pa_parquet.write_table(table, folder / "t.parquet")
    with open(folder / "t.jsonl", "w", encoding="utf-8") as handle:
        for row in ROWS:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return folder


def _table_config(path, **kw):
    columns = dict(id_column="id", passthrough_columns=["views", "score", "ok", "day"])
    columns.update(kw)
    return DatasetConfig(reader="table", path=[str(path)], options=TableOptions(**columns))


def test_table_formats_give_identical_entries(tmp_path):
    folder = _write_tables(tmp_path / "tables")
    results = {ext: TableReader(_table_config(folder / f"t.{ext}")).entries() for ext in ("csv", "jsonl", "parquet")}
    assert results["csv"] == results["jsonl"] == results["parquet"]
    entries = results["csv"]
    assert [e.key for e in entries] == ["007", "8", "9", "10"]  # ids stay text: "007" is not 7
    assert [e.caption for e in entries] == ["a cat", None, "", "NA"]  # "NA" is a caption, not a null
    assert [e.video_rel for e in entries] == [unicodedata.normalize("NFC", r["video"]) for r in ROWS]
    assert entries[0].video == str(folder / "clips/a.mp4")  # relative to the table's folder
    for entry, row in zip(entries, ROWS):
        assert entry.extra == {k: row[k] for k in ("views", "score", "ok", "day")}
        assert type(entry.extra["views"]) is int  # ints stay ints
        assert entry.mask is None and entry.depth is None


def test_table_without_id_uses_video_path(tmp_path):
    folder = tmp_path / "t"
    folder.mkdir()
    absolute = str(tmp_path / "elsewhere" / "x.mkv")
    pa_csv.write_csv(pa.table({"video": [f"v/{NFD_NAME}.mp4", absolute], "caption": ["a", "b"],
                               "depth": ["d/1.npz", None]}), folder / "t.csv")
    cfg = DatasetConfig(reader="table", path=[str(folder / "t.csv")], options=TableOptions(depth_column="depth"))
    entries = TableReader(cfg).entries()
    assert [e.key for e in entries] == [f"v/{NFC_NAME}", absolute[: -len(".mkv")]]
    assert entries[1].video == absolute
    assert entries[0].depth == str(folder / "d/1.npz") and entries[1].depth is None


def test_table_parts_concatenate_in_sorted_path_order(tmp_path):
    for name, clip in (("part-1.jsonl", "z"), ("part-0.jsonl", "y"), ("sub/part-2.jsonl", "x")):
        path = tmp_path / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps({"video": f"{clip}.mp4", "caption": clip}) + "\n", encoding="utf-8")
    cfg = DatasetConfig(reader="table", path=[str(tmp_path / "part-*.jsonl"), str(tmp_path / "sub" / "*.jsonl"),
                                              str(tmp_path / "part-0.jsonl")])
    entries = TableReader(cfg).entries()
    assert [e.caption for e in entries] == ["y", "z", "x"]  # part-0, part-1, sub/part-2; part-0 read once
    assert entries[2].video == str(tmp_path / "sub" / "x.mp4")


def test_table_refuses_bad_columns_and_cells(tmp_path):
    folder = _write_tables(tmp_path / "tables")
    with pytest.raises(ConfigError) as error:
        TableReader(_table_config(folder / "t.csv", passthrough_columns=["nope"])).entries()
    for column in ROWS[0]:
        assert column in str(error.value)
    with pytest.raises(ConfigError, match="dataset.caption_column='text'"):
        TableReader(_table_config(folder / "t.parquet", caption_column="text")).entries()
    pa_csv.write_csv(pa.table({"video": ["s3://bucket/a.mp4"], "caption": ["x"]}), tmp_path / "url.csv")
    with pytest.raises(ConfigError, match="URL"):
        TableReader(DatasetConfig(reader="table", path=[str(tmp_path / "url.csv")])).entries()
    pa_csv.write_csv(pa.table({"video": ["a.mp4", None], "caption": ["x", "y"]}), tmp_path / "hole.csv")
    with pytest.raises(ConfigError, match="row 2"):
        TableReader(DatasetConfig(reader="table", path=[str(tmp_path / "hole.csv")])).entries()
    with pytest.raises(ConfigError, match="matches no file"):
        TableReader(DatasetConfig(reader="table", path=[str(tmp_path / "none-*.csv")])).entries()


def test_parquet_nan_and_dates_become_json_values(tmp_path):
    import datetime

    table = pa.table({"video": ["a.mp4"], "caption": ["x"], "w": [float("nan")],
                      "when": pa.array([datetime.date(2024, 1, 2)])})
    pa_parquet.write_table(table, tmp_path / "t.parquet")
    cfg = DatasetConfig(reader="table", path=[str(tmp_path / "t.parquet")],
                        options=TableOptions(passthrough_columns=["w", "when"]))
    (entry,) = TableReader(cfg).entries()
    assert entry.extra == {"w": None, "when": "2024-01-02"}
    json.dumps(entry.extra, allow_nan=False)  # the manifest is strict JSON
