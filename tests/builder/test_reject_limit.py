"""run.max_reject_fraction holds for every reject, whenever it is found (decode-time rejects included), and
rejects.jsonl does not depend on where the dataset lives."""

from __future__ import annotations

import json
import shutil

import pytest

from helpers.builds import build_quietly, tiny_config, tiny_world, write_table
from helpers.media import write_text_file
from latentforge.errors import LatentforgeError


def test_rejects_found_while_decoding_count_against_the_limit(tmp_path):
    rows = tiny_world(tmp_path / "world", clips=3)
    table = write_table(rows, tmp_path / "world" / "samples.csv")
    root = tmp_path / "cache"
    # every clip shows objects with ids 1..3; declaring only the background rejects each one at decode
    config = tiny_config(table, root, overrides=("modalities.mask.ids=[0]",))
    with pytest.raises(LatentforgeError) as error:
        build_quietly(config)
    message = str(error.value)
    assert "were rejected in all" in message and "mask_id_out_of_range x" in message, message
    assert "declare the ids in modalities.mask.ids" in message
    assert not (root / "_CACHE_COMPLETE").exists() and not (root / "shards").exists()
    assert list((root / "build" / "staging").glob("unit-*.h5")), "staged work is kept for a resume"


def test_rejects_name_paths_relative_to_the_dataset(tmp_path):
    world = tmp_path / "here" / "world"
    rows = tiny_world(world, clips=3)
    write_text_file(world / "videos" / "broken.mp4")
    bad = [{**rows[0], "id": "bad_unreadable", "video": "videos/broken.mp4"},
           {**rows[1], "id": "bad_no_depth", "depth": "depth/nowhere.npz"}]
    write_table(rows[:2] + bad, world / "samples.csv")
    moved = tmp_path / "elsewhere" / "deeper" / "world"
    shutil.copytree(world, moved)
    sums = []
    for folder in (world, moved):
        root = folder.parent / "cache"
        build_quietly(tiny_config(folder / "samples.csv", root, overrides=("run.max_reject_fraction=1",)))
        rejects = [json.loads(line) for line in (root / "rejects.jsonl").read_text().splitlines()]
        assert {r["sample_id"]: r["reason"] for r in rejects} == {"bad_unreadable": "unreadable",
                                                                  "bad_no_depth": "missing_source"}
        assert all(str(tmp_path) not in r["detail"] for r in rejects), rejects
        assert any("videos/broken.mp4" in r["detail"] for r in rejects), rejects
        sums.append((root / "SHA256SUMS").read_text())
    assert sums[0] == sums[1]
