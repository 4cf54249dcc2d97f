"""Several table rows for one video: an `id` column gives the ids when dataset.id_column is unset, a repeated id keeps
its first row, and `verify --deep` re-reads the row the build kept, whether it finds the row through the plan or
through the table (--dataset)."""

from __future__ import annotations

import json

import pytest

from helpers.builds import build_quietly, read_manifest, run_cli, tiny_config, tiny_world, write_table
from latentforge.verification.entry import verify
from latentforge.verification.reencode import Overrides


def _rows(world, with_id: bool) -> list[dict]:
    clips = tiny_world(world, clips=3)  # the last clip is too short
    first, other = clips[0], clips[1]
    rows = [{"id": "a", "video": first["video"], "caption": "first caption of the clip"},
            {"id": "b", "video": first["video"], "caption": "second caption of the clip"},
            {"id": "c", "video": other["video"], "caption": other["caption"]}]
    return rows if with_id else [{k: v for k, v in row.items() if k != "id"} for row in rows]


def _build(tmp_path, rows, name):
    table = write_table(rows, tmp_path / "world" / f"{name}.csv")
    root = tmp_path / name
    overrides = ("dataset.id_column=null", "dataset.passthrough_columns=[]")
    config = tiny_config(table, root, modalities=("rgb",), overrides=overrides)
    return table, root, build_quietly(config)


@pytest.mark.parametrize("dataset", [False, True], ids=["plan", "table"])
def test_an_id_column_gives_the_ids_and_deep_verify_agrees(tmp_path, dataset):
    table, root, result = _build(tmp_path, _rows(tmp_path / "world", with_id=True), "with_id")
    assert result.num_samples == 3 and result.rejects_by_reason == {}
    manifest = read_manifest(root)
    assert [(r["sample_id"], r["prompt"]) for r in manifest] == [
        ("a", "first caption of the clip"), ("b", "second caption of the clip"), ("c", manifest[2]["prompt"])]
    overrides = Overrides(dataset=(str(table),), device="cpu") if dataset else Overrides(device="cpu")
    report = verify(root, deep=True, spot=3, overrides=overrides)
    assert report.ok, [c for c in report.checks if not c.ok]


@pytest.mark.parametrize("dataset", [False, True], ids=["plan", "table"])
def test_without_an_id_column_the_first_row_is_kept_and_deep_verify_reads_it(tmp_path, dataset):
    table, root, result = _build(tmp_path, _rows(tmp_path / "world", with_id=False), "no_id")
    assert result.num_samples == 2 and result.rejects_by_reason == {"duplicate_id": 1}
    kept = next(r for r in read_manifest(root) if r["prompt"].endswith("caption of the clip"))
    assert kept["prompt"] == "first caption of the clip"
    (reject,) = [json.loads(line) for line in (root / "rejects.jsonl").read_text().splitlines()]
    assert reject["reason"] == "duplicate_id" and f"table {table} row 2" in reject["detail"]
    assert f"of table {table} row 1, which is kept" in reject["detail"]
    assert "they differ in caption: 'first caption of the clip' vs 'second caption of the clip'" in reject["detail"]
    overrides = Overrides(dataset=(str(table),), device="cpu") if dataset else Overrides(device="cpu")
    report = verify(root, deep=True, spot=2, overrides=overrides)
    assert report.ok, [c for c in report.checks if not c.ok]


def test_a_row_repeated_exactly_says_so(tmp_path):
    rows = _rows(tmp_path / "world", with_id=False)
    table, root, result = _build(tmp_path, [rows[0], rows[2], rows[0]], "repeated")
    assert result.num_samples == 2 and result.rejects_by_reason == {"duplicate_id": 1}
    (reject,) = [json.loads(line) for line in (root / "rejects.jsonl").read_text().splitlines()]
    assert reject["detail"].endswith("same row repeated") and f"table {table} row 3" in reject["detail"]


def test_the_build_says_which_column_gives_the_ids(tmp_path):
    rows = _rows(tmp_path / "world", with_id=True)
    for name, table_rows, said in [
            ("with_id", rows, "note: sample ids come from the table's 'id' column"),
            ("sample_id", [{"sample_id": r["id"], **{k: v for k, v in r.items() if k != "id"}} for r in rows],
             "note: sample ids come from the table's 'sample_id' column"),
            ("no_id", [{k: v for k, v in r.items() if k != "id"} for r in rows],
             "note: sample ids are the video paths without their extension")]:
        table = write_table(table_rows, tmp_path / "world" / f"{name}.csv")
        done = run_cli("scan", "--dataset", str(table), "--set", "dataset.reader=table", "--tokenizer", "haar-4x8x8",
                       "--text", "none", "--device", "cpu", "--set", "frames.num_frames=9", "--set", "frames.height=32",
                       "--set", "frames.width=48", "--out", str(tmp_path / f"scan_{name}"))
        assert done.returncode == 0, done.stderr
        assert said in done.stderr, done.stderr
        assert done.stderr.count("note: sample ids") == 1
