"""`export --to ltx2-trainer` of a cache with LTX-2 audio latents: beside `latents/`, the trainer's `audio_latents/`
as its own preprocessing writes them (Lightricks/LTX-2 400fd31, packages/ltx-trainer):

- scripts/process_dataset.py: a video's sound goes to `audio_latents/` under the video latent's relative name, and
  a video without an audio track gets no file (process_videos.py counts it "without audio (skipped)");
- scripts/process_videos.py _encode_audio: {latents [C, T, F], num_time_steps T, frequency_bins F, duration
  = encoded samples / rate}, the audio VAE loaded in float32;
- ltx_core AudioEncoder._normalize_latents: the mean normalised over the packed [T, C*F] features by the VAE's own
  statistics, the cache's audio_latent unchanged.

bench/tools/ltx2_trainer_check.py reads such an export with the trainer's own dataset and strategies."""

from __future__ import annotations

import json

import h5py
import pytest
import torch

from helpers.audio_media import tone_after, write_clip_with_audio
from helpers.builds import build_quietly, read_manifest, tiny_config, write_table
from helpers.tiny_audio_vae import tiny_audio_vae
from helpers.tiny_diffusers_vaes import save_tiny_vae
from latentforge.errors import ConfigError
from latentforge.export import export_cache

AUDIO_KEYS = {"latents", "num_time_steps", "frequency_bins", "duration"}


def _cache(folder, audio_vae, fps="24"):
    clips = [write_clip_with_audio(folder / "tone.mp4", audio=tone_after(0.05, 16000, 1.0, channels=2)),
             write_clip_with_audio(folder / "silent.mp4"),
             write_clip_with_audio(folder / "late.mp4", audio=tone_after(0.0, 16000, 0.5, channels=2),
                                   audio_start=0.2)]
    table = write_table([{"id": clip.stem, "video": clip.name, "caption": clip.stem, "objects": 1} for clip in clips],
                        folder / "t.csv")
    video_vae = save_tiny_vae("ltx2", folder / "ltx2-vae", scaling_factor=0.7)
    root = folder / "cache"
    overrides = ("tokenizer.name=ltx2", f"tokenizer.checkpoint={video_vae}", "tokenizer.precision=fp32",
                 "frames.width=64", f"frames.fps={fps}", "audio.enabled=true", "audio.channels=2",
                 "audio.tokenizer=ltx2-audio", f"audio.checkpoint={audio_vae}", "audio.max_seconds=1")
    build_quietly(tiny_config(table, root, modalities=("rgb",), overrides=overrides))
    return root


@pytest.fixture(scope="module")
def audio_vae(tmp_path_factory):
    return tiny_audio_vae(tmp_path_factory.mktemp("ltx2-audio") / "vae", ltx2_latent=True)


def test_each_sample_with_sound_gets_the_trainers_audio_latent_dict_of_the_cached_latent(audio_vae, tmp_path):
    root = _cache(tmp_path, audio_vae)
    out = tmp_path / "precomputed"
    report = export_cache(root, "ltx2-trainer", out, ["rgb"])
    manifest = read_manifest(root)
    recorded = json.loads((root / "cache_config.json").read_text())["audio"]
    videos = sorted((out / "latents").glob("**/*.pt"))
    sounds = sorted((out / "audio_latents").glob("**/*.pt"))  # PrecomputedDataset's glob
    with_sound = [row for row in manifest if row["provenance"]["audio"]["present"]]
    assert sorted(row["sample_id"] for row in with_sound) == ["late", "tone"]  # "silent" has no audio stream
    assert report.written == len(videos) + len(sounds) and len(videos) == len(manifest) == 3
    assert [path.name for path in sounds] == [f"{row['dataset_index']:09d}.pt" for row in with_sound]
    for path, row in zip(sounds, with_sound):
        assert (out / "latents" / path.name).is_file()  # the pair the trainer's dataset matches by name
        data = torch.load(path, map_location="cpu", weights_only=True)
        assert set(data) == AUDIO_KEYS
        latents = data["latents"]
        assert latents.dtype == torch.float32 and latents.dim() == 3
        assert tuple(latents.shape) == (8, data["num_time_steps"], data["frequency_bins"])
        assert data["frequency_bins"] == 16 and type(data["num_time_steps"]) is int
        assert data["duration"] == 9 / 24 == recorded["samples"] / recorded["sample_rate"]
        with h5py.File(root / row["shard_path"], "r") as shard:
            stored = torch.from_numpy(shard["audio_latent"][row["cache_row"]])
        assert torch.equal(latents, stored)


def test_audio_latents_the_trainer_cannot_take_are_refused_before_the_folder_exists(audio_vae, tmp_path):
    for name in ("source", "narrow"):
        (tmp_path / name).mkdir()
    source = _cache(tmp_path / "source", audio_vae, fps="source")
    with pytest.raises(ConfigError, match="frames.fps=source, so its audio latents span audio.max_seconds"):
        export_cache(source, "ltx2-trainer", tmp_path / "out", ["rgb"])
    narrow = _cache(tmp_path / "narrow", tiny_audio_vae(tmp_path / "narrow-vae"))  # [4, T, 4]
    with pytest.raises(ConfigError, match=r"audio_latent is \[4, 10, 4\], and the LTX-2 DiT takes \[8, T, 16\]"):
        export_cache(narrow, "ltx2-trainer", tmp_path / "out", ["rgb"])
    assert not (tmp_path / "out").exists()
