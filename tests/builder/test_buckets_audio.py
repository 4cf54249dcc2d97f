"""Audio in a bucketed build (docs/audio.md, docs/frames.md): each bucket's cache holds its windows' sound as a
single-shape cache of that bucket's shape does, at the bucket's own length (num_frames / fps), with the audio
latent where an audio tokenizer is set; BucketedLatentDataset returns it, and deep verify decodes and encodes it
again in every bucket. The reference for each bucket is the unbucketed build of the same clip at that shape."""

from __future__ import annotations

import json

import numpy as np

from helpers.audio_media import tone_after, write_clip_with_audio
from helpers.builds import build_quietly, read_manifest, write_table
from helpers.tiny_audio_vae import tiny_audio_vae
from latentforge import verify
from latentforge.config.loading import load_config
from latentforge.dataset import BucketedLatentDataset, LatentCacheDataset

BUCKETS = [[17, 32, 64], [9, 32, 64], [17, 64, 32]]
# id -> (size, frames, audio): a long landscape, a short landscape, a portrait without sound
CLIPS = {"long": ((96, 48), 17, True), "short": ((96, 48), 11, True), "portrait": ((48, 96), 17, False)}


def _settings(table, root, vae, frames):
    return {"dataset": {"reader": "table", "path": [str(table)], "id_column": "id"},
            "frames": {**frames, "fps": 24, "resize": "cover_crop"}, "modalities": {"names": ["rgb"]},
            "tokenizer": {"name": "haar-4x8x8", "precision": "fp32"}, "text": {"name": "none"},
            "audio": {"enabled": True, "channels": 2, "tokenizer": "ltx2-audio", "checkpoint": str(vae)},
            "output": {"root": str(root), "rows_per_shard": 2, "unit_size": 2, "batch_size": 2, "min_free_bytes": 0},
            "run": {"workers_per_gpu": 0}}


def test_each_bucket_holds_its_windows_sound_as_a_single_shape_cache_would(tmp_path):
    rows = []
    for seed, (clip, (size, frames, sound)) in enumerate(CLIPS.items()):
        audio = tone_after(0.1 + 0.05 * seed, 16000, 1.0, channels=2) if sound else None
        write_clip_with_audio(tmp_path / f"{clip}.mp4", frames=frames, audio=audio, size=size)
        rows.append({"id": clip, "video": f"{clip}.mp4", "caption": clip})
    table = write_table(rows, tmp_path / "clips.csv")
    vae = tiny_audio_vae(tmp_path / "vae")
    root = tmp_path / "bucketed"
    build_quietly(load_config(extra=_settings(table, root, vae, {"buckets": BUCKETS})))

    dataset = BucketedLatentDataset(root)
    items = {item["sample_id"]: item for item in (dataset[i] for i in range(len(dataset)))}
    assert {clip: item["bucket"] for clip, item in items.items()} == {
        "long": "17x32x64", "short": "9x32x64", "portrait": "17x64x32"}
    index = json.loads((root / "buckets.json").read_text())
    for entry in index["buckets"]:
        recorded = json.loads((root / entry["path"] / "cache_config.json").read_text())["audio"]
        assert recorded["samples"] == round(entry["num_frames"] / 24 * 16000)  # the bucket's own window length
        [row] = read_manifest(root / entry["path"])
        assert row["provenance"]["audio"]["present"] == CLIPS[row["sample_id"]][2]
    for clip, item in items.items():
        single = tmp_path / f"single-{clip}"
        frames, height, width = (int(v) for v in item["bucket"].split("x"))
        one = write_table([r for r in rows if r["id"] == clip], tmp_path / f"{clip}.csv")
        shape = {"num_frames": frames, "height": height, "width": width}
        build_quietly(load_config(extra=_settings(one, single, vae, shape)))
        [reference] = list(LatentCacheDataset(single))
        for name in ("audio", "audio_span", "audio_length", "audio_latent", "audio_present"):
            assert np.array_equal(np.asarray(item[name]), np.asarray(reference[name])), (clip, name)
        assert bool(item["audio_present"]) == CLIPS[clip][2]

    report = verify(root, deep=True)
    assert report.ok, [c for c in report.failures]
    audio_checks = {c.name for c in report.checks if c.name.split("/")[1].startswith("audio") and c.ok}
    assert audio_checks == {f"{name}/{check}" for name in ("17x32x64", "9x32x64", "17x64x32")
                            for check in ("audio", "audio_latent")}
