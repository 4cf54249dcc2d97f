"""Issue 5's bad-input corpus through whole builds: every bad sample lands in rejects.jsonl with its DESIGN §5
reason and is counted; awkward but valid media (variable frame rate, rotation, odd and portrait sizes, 10-bit,
yuv444, unicode and spaces in paths) are accepted; and every accepted row is exactly what a build without the
bad samples gives. Media come from PyAV, Pillow and numpy (tests/_media.py and the demo world)."""

from __future__ import annotations

import json
import shutil
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av
import h5py
import numpy as np
import pytest

from helpers.builds import build_quietly, read_manifest, tiny_config, tiny_world, write_table
from helpers.exec_world import build_args
from helpers.media import pattern_frames, write_depth_npz, write_png_folder, write_text_file, write_video
from latentforge.sinks.hdf5.integrity import verify_integrity

# Manifest fields that legitimately change when other samples join the plan.
POSITIONAL = ("dataset_index", "source_index", "shard_path", "cache_row", "unit", "batch")
VFR_MS = [0, 30, 70, 100, 133, 170, 200, 240, 300, 310, 333, 370]
UNICODE_DIR = "vidéos über"  # NFC, with a space


def _faststart_mp4(path: Path, frames: np.ndarray) -> Path:
    """H.264 with the index (moov) before the data, as web videos are muxed (PyAV, movflags=faststart)."""
    with av.open(str(path), "w", options={"movflags": "faststart"}) as container:
        stream = container.add_stream("libx264", rate=24)
        stream.height, stream.width = frames.shape[1:3]
        stream.pix_fmt = "yuv420p"
        stream.options = {"preset": "veryfast", "crf": "12"}
        for image in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def _audio_only_mp4(path: Path) -> Path:
    """An mp4 holding one AAC stream and no video (PyAV's aac encoder)."""
    with av.open(str(path), "w") as container:
        stream = container.add_stream("aac", rate=16000)
        for k in range(8):
            frame = av.AudioFrame.from_ndarray(np.zeros((1, 1024), np.float32), format="fltp", layout="mono")
            frame.sample_rate, frame.pts = 16000, k * 1024
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def _cut(source: Path, target: Path, fraction: float) -> Path:
    data = source.read_bytes()
    target.write_bytes(data[: int(len(data) * fraction)])
    return target


def _packets_and_index(path: Path) -> tuple[int, int]:
    """(video packets actually in the file, frames its index lists), as PyAV's demuxer reports them."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        return sum(1 for p in container.demux(stream) if p.size), stream.frames


def _matching_sources(world: Path, name: str, count: int, width: int, height: int) -> tuple[str, str]:
    """A mask PNG folder and a depth npz of `count` frames at displayed size width x height."""
    ids = np.zeros((count, height, width), np.uint8)
    ids[:, : height // 2, : width // 2] = 1
    ids[:, height // 2 :, width // 2 :] = 2
    mask = write_png_folder(world / "masks" / name, ids)
    depth = np.linspace(1.0, 9.0, count * height * width, dtype=np.float32).reshape(count, height, width)
    write_depth_npz(world / "depth" / f"{name}.npz", depth)
    return str(mask.relative_to(world)), f"depth/{name}.npz"


def _handled_rows(world: Path) -> list[dict[str, Any]]:
    """Valid but awkward media, each with a mask and depth of its displayed size."""
    rows = []

    def add(sample_id: str, video_rel: str, count: int, width: int, height: int, **video_options: Any) -> None:
        coded = pattern_frames(count, width, height, seed=len(rows) + 10)
        if video_options.get("rotation"):
            coded = np.ascontiguousarray(np.rot90(coded, k=-1, axes=(1, 2)))  # stored sideways, shown upright
        (world / video_rel).parent.mkdir(parents=True, exist_ok=True)
        write_video(world / video_rel, coded, **video_options)
        mask, depth = _matching_sources(world, sample_id.replace(" ", "_"), count, width, height)
        rows.append({"id": sample_id, "video": video_rel, "caption": f"awkward clip {sample_id}", "mask": mask,
                     "depth": depth, "objects": 0})

    add("ok_vfr", "videos/vfr.mp4", len(VFR_MS), 64, 48, pts_ms=VFR_MS)
    add("ok_rotated", "videos/rotated.mp4", 10, 48, 64, rotation=90)
    add("ok_odd_yuv444", "videos/odd.mp4", 10, 63, 47, pix_fmt="yuv444p")
    add("ok_portrait", "videos/portrait.mp4", 10, 48, 64)
    add("ok_10bit", "videos/tenbit.mkv", 10, 64, 48, pix_fmt="yuv420p10le", colorspace="ITU709")
    add("ok ünïcode", f"{UNICODE_DIR}/clip ü 1.mp4", 10, 64, 48)
    return rows


def _bad_rows(world: Path, good: list[dict[str, Any]], too_short: dict[str, Any]) -> dict[str, tuple[dict, str]]:
    """id -> (table row, expected reason). Each row is a good row with one thing broken."""
    a, b, c = good
    videos, masks, depth = world / "videos", world / "masks", world / "depth"
    (videos / "zero.mp4").write_bytes(b"")
    write_text_file(videos / "text.mp4")
    _audio_only_mp4(videos / "audio.mp4")
    frames = pattern_frames(24, 64, 48, seed=3)
    write_video(videos / "plain.mp4", frames)  # index (moov) at the end: a cut loses it
    _cut(videos / "plain.mp4", videos / "no_index.mp4", 0.6)
    _faststart_mp4(videos / "fast.mp4", frames)
    cut = _cut(videos / "fast.mp4", videos / "fast_cut.mp4", 0.8)
    present, listed = _packets_and_index(cut)
    assert present >= 9 and listed == 24, (present, listed)  # the window itself is intact: only the end is gone

    def copy_mask(source: str, name: str) -> Path:
        return Path(shutil.copytree(world / source, masks / name))

    short_mask = copy_mask(a["mask"], "short")
    sorted(short_mask.iterdir())[-1].unlink()
    count = len(list((world / a["mask"]).iterdir()))
    write_png_folder(masks / "small", np.zeros((count, 24, 32), np.uint8))
    write_video(masks / "lossy.mp4", np.zeros((count, 48, 64, 3), np.uint8))  # H.264: ids would not survive
    foreign_ids = copy_mask(a["mask"], "foreign_ids")
    first = sorted(foreign_ids.iterdir())[0]
    write_png_folder(masks / "nine", np.full((1, 48, 64), 9, np.uint8))
    shutil.move(next((masks / "nine").iterdir()), first)
    with np.load(world / b["depth"]) as archive:
        real_depth = archive["depth"]
    write_depth_npz(depth / "few.npz", real_depth[:-1])
    write_depth_npz(depth / "small.npz", real_depth[:, :24, :32])
    write_depth_npz(depth / "nan.npz", np.where(np.arange(len(real_depth))[:, None, None] == 0, np.nan, real_depth))
    write_depth_npz(depth / "inf.npz", np.where(np.arange(len(real_depth))[:, None, None] == 2, np.inf, real_depth))

    cases = {
        "bad_zero_bytes": ({**a, "video": "videos/zero.mp4"}, "unreadable"),
        "bad_text_as_mp4": ({**a, "video": "videos/text.mp4"}, "unreadable"),
        "bad_audio_only": ({**a, "video": "videos/audio.mp4"}, "unreadable"),
        "bad_cut_before_index": ({**a, "video": "videos/no_index.mp4"}, "unreadable"),
        "bad_faststart_cut": ({**a, "video": "videos/fast_cut.mp4"}, "unreadable"),
        "bad_missing_video": ({**a, "video": "videos/nowhere.mp4"}, "missing_source"),
        too_short["id"]: (too_short, "too_short"),
        "bad_no_caption": ({**b, "caption": None}, "missing_caption"),
        "bad_blank_caption": ({**b, "caption": " \t "}, "empty_caption"),
        "bad_mask_frames": ({**a, "mask": "masks/short"}, "modality_mismatch"),
        "bad_mask_size": ({**a, "mask": "masks/small"}, "modality_mismatch"),
        "bad_depth_frames": ({**b, "depth": "depth/few.npz"}, "modality_mismatch"),
        "bad_depth_size": ({**b, "depth": "depth/small.npz"}, "modality_mismatch"),
        "bad_lossy_mask": ({**a, "mask": "masks/lossy.mp4"}, "lossy_mask_source"),
        "bad_mask_ids": ({**a, "mask": "masks/foreign_ids"}, "mask_id_out_of_range"),
        "bad_depth_nan": ({**b, "depth": "depth/nan.npz"}, "depth_not_finite"),
        "bad_depth_inf": ({**b, "depth": "depth/inf.npz"}, "depth_not_finite"),
        # the same id again, pointing at another clip: the first listing entry must win
        c["id"]: ({**a, "caption": "a duplicate"}, "duplicate_id"),
    }
    return {sample_id: ({**row, "id": sample_id}, reason) for sample_id, (row, reason) in cases.items()}


@dataclass(frozen=True)
class Corpus:
    world: Path
    expected: dict[str, str]  # rejected id -> reason
    accepted: list[str]
    mixed: Path
    clean: Path
    mixed_counts: dict[str, int]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Corpus:
    base = tmp_path_factory.mktemp("bad_inputs")
    world = base / "world"
    rows = tiny_world(world, clips=4)  # the last clip has 6 frames: too short for 9
    good, too_short = rows[:3], rows[3]
    handled = _handled_rows(world)
    bad = _bad_rows(world, good, too_short)
    listing = [row for row, _ in bad.values()]
    # Bad rows before, between and after the good ones; the duplicate comes after the entry it repeats.
    mixed_rows = listing[:6] + good[:1] + handled[:3] + listing[6:12] + good[1:] + handled[3:] + listing[12:]
    mixed, clean = base / "mixed", base / "clean"
    overrides = ("output.unit_size=4", "run.max_reject_fraction=1")  # a world made mostly of bad inputs
    result = build_quietly(tiny_config(write_table(mixed_rows, world / "mixed.jsonl"), mixed, overrides=overrides))
    build_quietly(tiny_config(write_table(good + handled, world / "clean.jsonl"), clean, overrides=overrides))
    accepted = sorted(unicodedata.normalize("NFC", row["id"]) for row in good + handled)
    return Corpus(world, {k: reason for k, (_, reason) in bad.items()}, accepted, mixed, clean,
                  result.rejects_by_reason)


def _latents_by_id(root: Path) -> dict[str, np.ndarray]:
    out = {}
    for row in read_manifest(root):
        with h5py.File(root / row["shard_path"], "r") as shard:
            out[row["sample_id"]] = shard["perception_latent_state"][row["cache_row"]]
    return out


def test_every_bad_input_is_rejected_with_its_reason_and_counted(corpus):
    rejects = [json.loads(line) for line in (corpus.mixed / "rejects.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {r["sample_id"]: r["reason"] for r in rejects} == corpus.expected
    expected_counts: dict[str, int] = {}
    for reason in corpus.expected.values():
        expected_counts[reason] = expected_counts.get(reason, 0) + 1
    assert corpus.mixed_counts == expected_counts
    [stats] = [json.loads(p.read_text()) for p in (corpus.mixed / "build").glob("stats-*.json")]
    assert stats["rejects_by_reason"] == expected_counts
    details = {r["sample_id"]: r["detail"] for r in rejects}
    assert "fast_cut.mp4" in details["bad_faststart_cut"] and "cut short" in details["bad_faststart_cut"]
    assert "nan" in details["bad_depth_nan"].lower() and "inf" in details["bad_depth_inf"].lower()
    assert "[9]" in details["bad_mask_ids"]
    assert verify_integrity(corpus.mixed).ok


def test_accepted_rows_equal_a_build_without_the_bad_inputs(corpus):
    mixed_rows = {row["sample_id"]: row for row in read_manifest(corpus.mixed)}
    clean_rows = {row["sample_id"]: row for row in read_manifest(corpus.clean)}
    assert sorted(mixed_rows) == sorted(clean_rows) == corpus.accepted
    for sample_id, clean in clean_rows.items():
        mixed = {k: v for k, v in mixed_rows[sample_id].items() if k not in POSITIONAL}
        assert mixed == {k: v for k, v in clean.items() if k not in POSITIONAL}, sample_id
    mixed_latents, clean_latents = _latents_by_id(corpus.mixed), _latents_by_id(corpus.clean)
    for sample_id, latent in clean_latents.items():
        assert np.isfinite(latent).all() and np.abs(latent).max() > 0, sample_id
        np.testing.assert_array_equal(mixed_latents[sample_id], latent, err_msg=sample_id)


def test_awkward_media_keep_their_timestamps_orientation_and_paths(corpus):
    rows = {row["sample_id"]: row for row in read_manifest(corpus.mixed)}
    with av.open(str(corpus.world / "videos" / "vfr.mp4")) as container:  # PyAV's own frame times
        times = [frame.time for frame in container.decode(video=0)]
    vfr = rows["ok_vfr"]["provenance"]
    assert vfr["frame_indices"] == list(range(9))
    np.testing.assert_allclose(vfr["timestamps"], times[:9], atol=1e-9)
    np.testing.assert_allclose(vfr["timestamps"], np.array(VFR_MS[:9]) / 1000, atol=1e-9)
    assert rows["ok_rotated"]["provenance"]["rotation"] == 90
    assert rows["ok_rotated"]["provenance"]["source_size"] == [48, 64]  # displayed: portrait
    assert rows["ok_portrait"]["provenance"]["source_size"] == [48, 64]
    assert rows["ok_odd_yuv444"]["provenance"]["source_size"] == [63, 47]
    assert rows["ok ünïcode"]["source_path"] == f"{UNICODE_DIR}/clip ü 1.mp4"
    with av.open(str(corpus.world / "videos" / "tenbit.mkv")) as container:
        assert container.streams.video[0].codec_context.pix_fmt == "yuv420p10le"  # really a 10-bit source


def test_missing_and_blank_captions_become_the_empty_prompt_on_request(tmp_path):
    world = tmp_path / "world"
    row = tiny_world(world, clips=2)[0]  # the last clip of a world is too short
    rows = [{**row, "id": "no_caption", "caption": None}, {**row, "id": "blank_caption", "caption": "  "}, row]
    table = write_table(rows, world / "captions.jsonl")
    result = build_quietly(tiny_config(table, tmp_path / "cache", modalities=("rgb",),
                                       overrides=("dataset.on_missing_caption=empty",)))
    assert result.num_samples == 3 and result.rejects_by_reason == {}
    prompts = {r["sample_id"]: r["prompt"] for r in read_manifest(tmp_path / "cache")}
    assert prompts == {"no_caption": "", "blank_caption": "", row["id"]: row["caption"]}


def test_max_reject_fraction_aborts_a_mostly_broken_run_before_encoding(tmp_path, cli):
    videos = tmp_path / "data" / "videos"
    videos.mkdir(parents=True)
    write_video(videos / "good.mp4", pattern_frames(9, 48, 32))
    (videos / "zero.mp4").write_bytes(b"")
    write_text_file(videos / "text.mp4")
    rows = [("good", "good.mp4"), ("zero", "zero.mp4"), ("text", "text.mp4"), ("gone", "gone.mp4")]
    table = write_table([{"id": i, "video": f"videos/{v}", "caption": "c"} for i, v in rows],
                        tmp_path / "data" / "samples.csv")
    root = tmp_path / "cache"
    done = cli(build_args(table, root, "--max-reject-fraction", "0.5", "--workers-per-gpu", "0"))
    message = " ".join(done.stderr.split())  # rich wraps lines
    assert done.returncode == 1, done.stderr
    assert "3 of 4 samples were rejected by the plan and the probe, more than run.max_reject_fraction=0.5" in message
    assert "unreadable x2: re-download" in message and "missing_source x1: fix the paths" in message
    assert "Traceback" not in done.stderr
    assert not list((root / "build").glob("staging/unit-*.h5")) and not (root / "shards").exists()
    [stats] = [json.loads(p.read_text()) for p in (root / "build").glob("stats-*.json")]
    assert stats["outcome"] == "failed" and stats["samples_encoded_this_run"] == 0
