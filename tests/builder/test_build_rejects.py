"""Bad samples become rejects with DESIGN §5 reasons; the build completes, verifies, and good rows are
exactly what a build without the bad samples gives (issue 2, "Rejects")."""

from __future__ import annotations

import json
import shutil

import h5py
import numpy as np

from helpers.builds import build_quietly, read_manifest, tiny_config, tiny_t5, tiny_world, write_table
from helpers.media import write_text_file
from latentforge.sinks.hdf5.integrity import verify_integrity

# Manifest fields that legitimately change when other samples join the plan.
POSITIONAL = ("dataset_index", "source_index", "shard_path", "cache_row", "unit", "batch")


def _without_positions(row: dict) -> dict:
    return {k: v for k, v in row.items() if k not in POSITIONAL}


def _latents_by_id(root) -> dict[str, np.ndarray]:
    out = {}
    for row in read_manifest(root):
        with h5py.File(root / row["shard_path"], "r") as shard:
            out[row["sample_id"]] = shard["perception_latent_state"][row["cache_row"]]
            assert int(shard["source_index"][row["cache_row"]]) == row["source_index"]
    return out


def test_bad_samples_are_rejected_with_their_reason_and_good_rows_are_unaffected(tmp_path, cli):
    world = tmp_path / "world"
    rows = tiny_world(world, clips=4)  # clip_003 has 6 frames: too short for 9
    good = rows[:3]
    write_text_file(world / "videos" / "broken.mp4")
    short_masks = world / "masks" / "clip_001_short"
    shutil.copytree(world / "masks" / "clip_001", short_masks)
    sorted(short_masks.iterdir())[-1].unlink()
    bad = [
        {**rows[0], "id": "bad_unreadable", "video": "videos/broken.mp4"},
        {**rows[0], "id": "bad_no_caption", "caption": None},
        {**rows[1], "id": "bad_mask_frames", "mask": "masks/clip_001_short"},
        {**rows[2], "id": "bad_no_depth", "depth": "depth/nowhere.npz"},
        rows[3],
    ]
    expected = {
        "bad_unreadable": "unreadable",
        "bad_no_caption": "missing_caption",
        "bad_mask_frames": "modality_mismatch",
        "bad_no_depth": "missing_source",
        "clip_003": "too_short",
    }
    mixed_root, clean_root = tmp_path / "mixed", tmp_path / "clean"
    # Bad rows first and last in the listing: good rows must not depend on where bad ones sit. One unit of
    # work here; a unit holding only rejects has its own test below.
    one_unit = ("output.unit_size=16", "run.max_reject_fraction=1")
    mixed = build_quietly(tiny_config(write_table(bad[:2] + good + bad[2:], world / "mixed.jsonl"), mixed_root,
                                      overrides=one_unit))
    build_quietly(tiny_config(write_table(good, world / "clean.jsonl"), clean_root, overrides=one_unit))

    rejects = [json.loads(line) for line in (mixed_root / "rejects.jsonl").read_text().splitlines()]
    assert {r["sample_id"]: r["reason"] for r in rejects} == expected
    assert mixed.rejects_by_reason == {reason: 1 for reason in expected.values()}
    assert [r["sample_id"] for r in rejects] == sorted(expected)  # codepoint order, one line each
    details = {r["sample_id"]: r["detail"] for r in rejects}
    assert "broken.mp4" in details["bad_unreadable"] and "nowhere.npz" in details["bad_no_depth"]

    completed = cli(["verify", str(mixed_root)])
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert (mixed_root / "_CACHE_COMPLETE").is_file()

    mixed_rows = {row["sample_id"]: row for row in read_manifest(mixed_root)}
    clean_rows = {row["sample_id"]: row for row in read_manifest(clean_root)}
    assert sorted(mixed_rows) == sorted(clean_rows) == ["clip_000", "clip_001", "clip_002"]
    for sample_id, clean in clean_rows.items():
        assert _without_positions(mixed_rows[sample_id]) == _without_positions(clean), sample_id
    # The dense dataset_index skips nothing even though source_index has gaps where the rejects sit.
    assert [row["dataset_index"] for row in read_manifest(mixed_root)] == [0, 1, 2]
    assert [row["source_index"] for row in read_manifest(mixed_root)] != [0, 1, 2]
    mixed_latents, clean_latents = _latents_by_id(mixed_root), _latents_by_id(clean_root)
    for sample_id, latent in clean_latents.items():
        assert latent.dtype == np.float16 and np.abs(latent).max() > 0
        np.testing.assert_array_equal(mixed_latents[sample_id], latent, err_msg=sample_id)


def test_a_unit_of_work_whose_samples_are_all_rejected_still_commits(tmp_path):
    world = tmp_path / "world"
    rows = tiny_world(world, clips=3)
    write_text_file(world / "videos" / "broken.mp4")
    bad = [{**rows[0], "id": f"bad_{i}", "video": "videos/broken.mp4"} for i in range(2)]
    root = tmp_path / "cache"
    model = tiny_t5(tmp_path / "tiny-t5", rows, d_model=64)  # text too: an empty unit encodes no prompt
    # unit_size 2: the two bad ids sort first and fill unit 0 on their own.
    result = build_quietly(tiny_config(write_table(bad + rows[:2], world / "samples.csv"), root, text_path=model,
                                       overrides=("output.unit_size=2",)))
    assert result.num_samples == 2 and result.rejects_by_reason == {"unreadable": 2}
    assert [row["sample_id"] for row in read_manifest(root)] == ["clip_000", "clip_001"]
    assert verify_integrity(root).ok
