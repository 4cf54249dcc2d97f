"""Awkward containers through whole builds (haar-4x8x8, windows every 6 frames): every window equals a decode from
the stream's start or is rejected with its true cause, one bad file never ends a build, and a deep verify, which
decodes from the start, fails a cache built through a seek path that hands out wrong frames.

Media: tests/helpers/container_media.py (PyAV). The comparison with a decode from the start is deep verify's
exact re-encode (same machine and software), whose own independence is what the last test proves.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import container_media
from helpers.builds import build_quietly, read_manifest, tiny_config, write_table
from latentforge.decode import frame_reader, pyav, stream_probe
from latentforge.verification.deep import verify_deep

OVERRIDES = ("frames.num_frames=5", "frames.windows=every 6", "output.unit_size=8", "output.batch_size=4",
             "run.max_reject_fraction=1")
MEDIA = {  # id: (writer, file name)
    "long_gop_ts": (container_media.mpeg4_ts_long_gop, "long.ts"),
    "old_x264_444": (container_media.old_x264_lossless_444, "old.mp4"),
    "avi_bframes": (container_media.x264_avi_bframes, "b.avi"),
    "vp9_hidden": (container_media.vp9_hidden_frames, "hidden.webm"),
    "vp9_sizes": (container_media.vp9_resolution_change, "sizes.webm"),
    "bad_tag": (container_media.non_utf8_tag, "tag.mp4"),
}


def _table(folder: Path, names: list[str]) -> Path:
    rows = []
    for name in names:
        writer, file_name = MEDIA[name]
        writer(folder / file_name)
        rows.append({"id": name, "video": file_name, "caption": f"clip {name}", "objects": 0})
    return write_table(rows, folder / "table.jsonl")


def _rejects(root: Path) -> dict[str, tuple[str, str]]:
    lines = (root / "rejects.jsonl").read_text(encoding="utf-8").splitlines()
    return {row["sample_id"]: (row["reason"], row["detail"]) for row in map(json.loads, lines)}


@pytest.fixture(scope="module")
def awkward_cache(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("awkward")
    root = folder / "cache"
    build_quietly(tiny_config(_table(folder, list(MEDIA)), root, modalities=("rgb",), overrides=OVERRIDES))
    return root


def test_every_window_equals_a_decode_from_the_start_or_names_the_size_change(awkward_cache):
    rows = read_manifest(awkward_cache)
    assert _rejects(awkward_cache).keys() == {"vp9_sizes@12"}  # frames 12..16: 64x48 until 15, 64x40 from 16
    reason, detail = _rejects(awkward_cache)["vp9_sizes@12"]
    assert reason == "resolution_change" and "64x48" in detail and "64x40" in detail
    report = verify_deep(awkward_cache, indices=list(range(len(rows))))
    assert report.ok, [f"{c.name}: {c.detail}" for c in report.failures]
    assert report.comparison.startswith("exact")


def test_one_bad_file_never_ends_a_build(tmp_path, monkeypatch):
    """An unexpected error while probing one file, or decoding another, rejects that sample alone."""
    table = _table(tmp_path, ["avi_bframes", "bad_tag", "vp9_hidden"])
    real_probe, real_output = stream_probe._probe, pyav.frame_to_output

    def probe(path):
        if path.endswith("b.avi"):
            raise RuntimeError("a probe bug")
        return real_probe(path)

    def to_output(frame, info, *args, **kwargs):
        if info.codec == "vp9":
            raise ValueError("a decode bug")
        return real_output(frame, info, *args, **kwargs)

    monkeypatch.setattr(stream_probe, "_probe", probe)
    monkeypatch.setattr(pyav, "frame_to_output", to_output)
    root = tmp_path / "cache"
    build_quietly(tiny_config(table, root, modalities=("rgb",), overrides=(*OVERRIDES, "frames.windows=one")))
    rejects = _rejects(root)
    assert rejects["avi_bframes"][0] == "unreadable" and "RuntimeError: a probe bug" in rejects["avi_bframes"][1]
    assert rejects["vp9_hidden"][0] == "decode_error" and "ValueError: a decode bug" in rejects["vp9_hidden"][1]
    assert [row["sample_id"] for row in read_manifest(root)] == ["bad_tag"]


def test_deep_verify_fails_a_cache_whose_seeks_handed_out_wrong_frames(tmp_path, monkeypatch):
    """A seek path that hands out the next frame for each needed one (and is trusted by the build) makes a cache
    that verify --deep must fail: it decodes from the start, so the same defect cannot verify itself."""
    real = frame_reader._after_seek

    def off_by_one(path, info, anchor, needed, *args):
        frames = dict(real(path, info, anchor, sorted({*needed, *(i + 1 for i in needed)} & set(range(len(info.pts)))),
                           *args))
        for index in needed:
            yield index, frames.get(index + 1, frames[index])

    monkeypatch.setattr(frame_reader, "_after_seek", off_by_one)
    root = tmp_path / "cache"
    build_quietly(tiny_config(_table(tmp_path, ["long_gop_ts"]), root, modalities=("rgb",), overrides=OVERRIDES))
    rows = read_manifest(root)
    seeked = [row["dataset_index"] for row in rows if row["provenance"]["frame_indices"][0] >= 36]  # past keyframe 36
    assert seeked
    report = verify_deep(root, indices=[rows[0]["dataset_index"], *seeked])
    assert not report.ok
    failed = {c.dataset_index for c in report.failures if c.name == "reencode"}
    assert failed == set(seeked)  # the windows decoded from the start (before keyframe 36) verify
