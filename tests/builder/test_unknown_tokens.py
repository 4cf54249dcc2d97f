"""Captions the text encoder cannot read are caught: a Chinese caption through a tiny T5 whose vocabulary is the
English captions is recorded with its share of `<unk>` tokens (counted here from transformers' own tokenizer), the
build says so once in a note, `stats` shows the distribution; with text.on_unknown=reject the sample is rejected
with its reason before it joins a batch."""

from __future__ import annotations

import json
import warnings

import pyarrow.parquet as pq
import pytest
from transformers import AutoTokenizer

from helpers.builds import build_quietly, read_manifest, tiny_config, tiny_t5, tiny_world, write_table
from latentforge.cache.rows import ManifestRow
from latentforge.errors import InputNotice
from latentforge.report.statistics import compute_stats
from latentforge.report.stats_report import stats
from latentforge.sinks.hdf5.integrity import verify_integrity

CHINESE = "一只黄色的方块向右移动"  # "a yellow square moving right": no character of it is in the tiny vocabulary
NOTICE = "tokenizer does not know"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Three clips: clip_001 captioned in Chinese, clip_002 in English with a few Chinese characters inside (under
    the 10 % limit); the tiny T5 knows the English captions' characters only."""
    folder = tmp_path_factory.mktemp("unknown-tokens")
    rows = tiny_world(folder / "world", clips=4)[:3]  # clip_003 is too short for 9 frames
    t5 = tiny_t5(folder / "t5", rows, d_model=64)
    rows[1] = {**rows[1], "caption": CHINESE}
    rows[2] = {**rows[2], "caption": rows[2]["caption"].replace(" moving ", " 在桌子上 moving ", 1)}
    return write_table(rows, folder / "world" / "samples.jsonl"), t5, folder


def _reference_fraction(tokenizer, caption: str) -> float:
    """transformers' tokenizer: the share of its unk token among the caption's tokens (without the appended </s>)."""
    tokens = tokenizer.convert_ids_to_tokens(tokenizer(caption, add_special_tokens=False)["input_ids"])
    return tokens.count(tokenizer.unk_token) / len(tokens)


def _build(table, t5, root, *overrides: str) -> tuple[object, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = build_quietly(tiny_config(table, root, text_path=t5, overrides=overrides))
    return result, [str(w.message) for w in caught if issubclass(w.category, InputNotice) and NOTICE in str(w.message)]


def test_a_caption_the_encoder_cannot_read_is_recorded_warned_once_and_counted_by_stats(world, cli):
    table, t5, folder = world
    root = folder / "warned"
    result, notices = _build(table, t5, root)
    assert result.num_samples == 3 and result.rejects_by_reason == {}

    tokenizer = AutoTokenizer.from_pretrained(t5)
    rows = {row["sample_id"]: row for row in read_manifest(root)}
    for sample_id, row in rows.items():
        assert row["unknown_token_fraction"] == pytest.approx(_reference_fraction(tokenizer, row["prompt"]),
                                                              abs=5e-5), sample_id
    assert rows["clip_000"]["unknown_token_fraction"] == 0.0
    assert rows["clip_001"]["unknown_token_fraction"] == 0.5  # "▁", "<unk>": the run of unknown characters is one
    assert 0 < rows["clip_002"]["unknown_token_fraction"] <= 0.1

    # one note for the build, naming the count, the sample and the fix
    assert len(notices) == 1, notices
    assert notices[0].startswith("1 of 3 captions have more than 10% tokens the t5 tokenizer does not know")
    assert "clip_001 50%" in notices[0] and "text.name=umt5" in notices[0] and "text.on_unknown=reject" in notices[0]

    assert verify_integrity(root).ok
    table_rows = pq.read_table(root / "manifest.parquet").to_pylist()
    assert [r["unknown_token_fraction"] for r in table_rows] == [rows[r["sample_id"]]["unknown_token_fraction"]
                                                                 for r in table_rows]

    report = stats(root, out=folder / "stats")
    unknown = report.stats.unknown_tokens
    assert (unknown.measured, unknown.with_unknown, unknown.over_limit) == (3, 2, 1)
    assert unknown.max == 0.5 and unknown.histogram["0"] == 1 and unknown.histogram["(0.4, 0.5]"] == 1
    assert [c.sample_id for c in unknown.worst] == ["clip_001", "clip_002"]
    written = json.loads((folder / "stats" / "stats.json").read_text(encoding="utf-8"))
    assert written["unknown_tokens"]["over_limit"] == 1
    assert (folder / "stats" / "unknown_tokens.png").is_file()
    shown = cli(["stats", str(root), "--out", str(folder / "stats-cli")])
    assert shown.returncode == 0 and "unknown tokens in captions: 2 of 3 captions hold some, 1 more than 10%" in \
        shown.stdout, shown.stdout + shown.stderr


def test_with_on_unknown_reject_the_sample_is_rejected_with_its_reason(world):
    table, t5, folder = world
    root = folder / "rejected"
    result, notices = _build(table, t5, root, "text.on_unknown=reject", "run.max_reject_fraction=1",
                             "output.unit_size=3")
    assert result.rejects_by_reason == {"unknown_tokens": 1} and notices == []
    rejects = [json.loads(line) for line in (root / "rejects.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(r["sample_id"], r["reason"], r["stage"]) for r in rejects] == [("clip_001", "unknown_tokens", "encode")]
    assert "50%" in rejects[0]["detail"] and "text.name=umt5" in rejects[0]["detail"]
    kept = read_manifest(root)
    assert [row["sample_id"] for row in kept] == ["clip_000", "clip_002"]
    # the rejected sample took no place in a batch: in the one unit, the two kept rows are one batch of two
    assert [(row["unit"], row["batch"]) for row in kept] == [(0, 0), (0, 0)]
    config = json.loads((root / "cache_config.json").read_text(encoding="utf-8"))
    assert config["text"]["on_unknown"] == "reject" and config["text"]["max_unknown_fraction"] == 0.1
    assert verify_integrity(root).ok


def test_a_cache_without_the_field_reads_as_not_measured(world, tmp_path):
    """Rows written before the field existed (or pickle rows) parse with unknown_token_fraction None, and stats counts
    them as not measured; a value outside [0, 1] or the field out of its place is not a manifest row."""
    table, t5, folder = world
    root = tmp_path / "cache"
    build_quietly(tiny_config(table, root, text_path=t5))
    lines = (root / "manifest.jsonl").read_text(encoding="utf-8").splitlines()
    old = [json.dumps({k: v for k, v in json.loads(line).items() if k != "unknown_token_fraction"},
                      ensure_ascii=False, separators=(",", ":")) for line in lines]
    assert all(ManifestRow.from_line(line).unknown_token_fraction is None for line in old)
    (root / "manifest.jsonl").write_text("".join(line + "\n" for line in old), encoding="utf-8")
    unknown = compute_stats(root).unknown_tokens
    assert (unknown.measured, unknown.not_measured, unknown.max) == (0, 3, None)

    row = json.loads(lines[1])
    with pytest.raises(ValueError, match="not a number in"):
        ManifestRow.from_json({**row, "unknown_token_fraction": 1.5})
    moved = {"unknown_token_fraction": 0.5, **{k: v for k, v in row.items() if k != "unknown_token_fraction"}}
    with pytest.raises(ValueError, match="not an object with keys"):
        ManifestRow.from_json(moved)


def test_a_build_without_text_is_unaffected(world, tmp_path):
    table, _, _ = world
    root = tmp_path / "cache"
    result, notices = _build(table, None, root)
    assert result.rejects_by_reason == {} and notices == []
    assert all("unknown_token_fraction" not in row for row in read_manifest(root))
    assert "unknown_token_fraction" not in pq.read_table(root / "manifest.parquet").column_names
    assert compute_stats(root).unknown_tokens is None
