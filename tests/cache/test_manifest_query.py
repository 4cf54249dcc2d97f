"""manifest.parquet and `latentforge query`: the SQL answer equals a filter over manifest.jsonl written with the
json module (what `jq` would select), the index is checked by verify, and a query can read nothing else."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers.fake_rows import build_cache
from latentforge import query_indices
from latentforge.cache.checksums import write_sha256sums
from latentforge.cli.main import main
from latentforge.errors import ConfigError
from latentforge.sinks.hdf5.integrity import verify_integrity


@pytest.fixture(scope="module")
def fake_cache(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("query") / "cache"
    build_cache(root)
    return root


def jsonl_rows(root: Path) -> list[dict]:
    return [json.loads(line) for line in (root / "manifest.jsonl").read_text(encoding="utf-8").splitlines()]


def test_sql_selects_the_rows_a_json_filter_selects(fake_cache):
    rows = jsonl_rows(fake_cache)
    cases = {
        "caption LIKE '%number 1%' AND num_frames >= 3":
            lambda r: "number 1" in r["prompt"] and len(r["provenance"]["frame_indices"]) >= 3,
        "prompt_truncated OR source_index > 20": lambda r: r["prompt_truncated"] or r["source_index"] > 20,
        "split = 'train' AND unit = 1": lambda r: r["extra"]["split"] == "train" and r["unit"] == 1,
        "json_extract(provenance, '$.crop_box[2]')::INT = 64 AND cache_row = 0":
            lambda r: r["provenance"]["crop_box"][2] == 64 and r["cache_row"] == 0,
    }
    for where, keep in cases.items():
        want = [r["dataset_index"] for r in rows if keep(r)]
        assert 0 < len(want) < len(rows), where  # each case selects a proper subset
        assert query_indices(fake_cache, where) == want, where


def test_index_is_checksummed_and_holds_one_row_per_manifest_line(fake_cache):
    sums = (fake_cache / "SHA256SUMS").read_text(encoding="utf-8")
    assert "  manifest.parquet\n" in sums
    table = pq.read_table(fake_cache / "manifest.parquet")
    rows = jsonl_rows(fake_cache)
    assert table.column("sample_id").to_pylist() == [r["sample_id"] for r in rows]
    assert table.column("dataset_index").to_pylist() == list(range(len(rows)))
    assert [json.loads(text) for text in table.column("provenance").to_pylist()] == [r["provenance"] for r in rows]


def test_cli_prints_indices_and_ids(fake_cache, capsys):
    assert main(["query", str(fake_cache), "sample_id LIKE '%vid_00%'"]) == 0
    want = [r for r in jsonl_rows(fake_cache) if "vid_00" in r["sample_id"]]
    assert capsys.readouterr().out == "".join(f"{r['dataset_index']}\t{r['sample_id']}\n" for r in want)
    assert main(["query", str(fake_cache), "sample_id LIKE '%vid_00%'", "--count"]) == 0
    assert capsys.readouterr().out == f"{len(want)}\n"


def test_a_bad_condition_names_itself_and_the_columns(fake_cache, capsys):
    with pytest.raises(ConfigError, match=r"no_such_column.*the columns are dataset_index, source_index"):
        query_indices(fake_cache, "no_such_column = 1")
    assert main(["query", str(fake_cache), "no_such_column = 1"]) == 2
    assert "no_such_column" in capsys.readouterr().err


def test_a_query_reads_no_other_file(fake_cache, tmp_path):
    secret = tmp_path / "secret.csv"
    secret.write_text("a\n1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="does not run"):
        query_indices(fake_cache, f"EXISTS (SELECT * FROM read_csv('{secret}'))")


@pytest.mark.parametrize("where", [
    "1=0) UNION ALL SELECT 999999, 'forged' --",  # closes the condition, adds a row, comments out the rest
    "1=0) UNION ALL SELECT 999999, 'forged' FROM manifest WHERE (1=1",
    "1=1); DROP TABLE manifest; SELECT (1",  # a second statement
    "1=1; SELECT 999999",
    "1=0 UNION ALL SELECT 999999, 'forged'",
    "1=1) OR (1=1",
    "dataset_index > 2, dataset_index < 4",  # two expressions
])
def test_a_query_is_one_condition_not_a_statement(fake_cache, cli, where):
    with pytest.raises(ConfigError, match="is not one SQL condition"):
        query_indices(fake_cache, where)
    done = cli(["query", str(fake_cache), where, "--ids"])
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and "is not one SQL condition" in done.stderr
    assert query_indices(fake_cache, "1=1") == list(range(len(jsonl_rows(fake_cache))))  # the table is intact


def test_subqueries_and_comments_inside_the_condition_are_only_conditions(fake_cache):
    rows = jsonl_rows(fake_cache)
    assert query_indices(fake_cache, "dataset_index IN (SELECT max(dataset_index) FROM manifest)") == [len(rows) - 1]
    assert query_indices(fake_cache, "dataset_index < 2 -- a comment ends the text, nothing more") == [0, 1]


def test_verify_fails_an_index_that_disagrees_with_the_manifest(fake_cache, tmp_path):
    root = tmp_path / "cache"
    shutil.copytree(fake_cache, root)
    table = pq.read_table(root / "manifest.parquet")
    prompts = table.column("prompt").to_pylist()
    prompts[3] = "a car"
    pq.write_table(table.set_column(table.schema.get_field_index("prompt"), "prompt", pa.array(prompts)),
                   root / "manifest.parquet")
    write_sha256sums(root)  # the sums agree; only the index and manifest.jsonl disagree
    failures = [c for c in verify_integrity(root).failures if c.name == "manifest_table"]
    assert failures and "does not hold the rows of manifest.jsonl" in failures[0].detail
