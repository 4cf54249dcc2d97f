"""`export --to ltx-video-trainer`: a cache built with a tiny LTX-Video VAE (diffusers' AutoencoderKLLTXVideo,
random weights and latent statistics) exported, its files read back the way the LTX-Video trainer reads them and
checked against what its own preprocessing writes (Lightricks/LTX-Video-Trainer 31b1273):

- src/ltxv_trainer/datasets.py PrecomputedDataset: `latents/**/*.pt` globbed, each loaded with
  `torch.load(..., weights_only=True)`, its text at `conditions/{same name}`;
- scripts/process_videos.py compute_video_latents: {latents, num_frames, height, width, fps}, the latent grid as
  ints, the latent bfloat16 (the VAE loaded in bfloat16, its output saved uncast);
- src/ltxv_trainer/ltxv_utils.py encode_video: `(z - latents_mean) / latents_std` with no scaling factor, then
  pack_latents (transcribed below as the reference) to [F'·H'·W', 128].

bench/tools/ltx_video_trainer_check.py loads an export with the trainer's own PrecomputedDataset and training
strategy (docs/export.md has the result); the trainer is not on PyPI, so the suite checks the same facts without
it."""

from __future__ import annotations

import json

import h5py
import pytest
import torch

from helpers.builds import build_quietly, read_manifest, tiny_config, tiny_world, write_table
from helpers.fake_rows import WAN21_TOKENIZER, build_cache, make_samples
from helpers.tiny_diffusers_vaes import save_tiny_vae
from latentforge.errors import ConfigError
from latentforge.export import export_cache

SCALING_FACTOR = 0.7  # not 1.0 (the released VAE's), so the division is seen
TRAINER_KEYS = {"latents", "num_frames", "height", "width", "fps"}


def pack_latents(latents, spatial_patch_size=1, temporal_patch_size=1):
    """ltxv_trainer/ltxv_utils.py pack_latents at 31b1273, as written there: [B,C,F,H,W] -> [B,L,D]."""
    b, c, f, h, w = latents.shape
    latents = latents.reshape(b, -1, f // temporal_patch_size, temporal_patch_size, h // spatial_patch_size,
                              spatial_patch_size, w // spatial_patch_size, spatial_patch_size)
    latents = latents.permute(0, 2, 4, 6, 1, 3, 5, 7).flatten(4, 7).flatten(1, 3)
    return latents


@pytest.fixture(scope="module")
def ltx_video_cache(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ltx-video-trainer")
    table = write_table(tiny_world(folder / "world"), folder / "world" / "samples.csv")
    weights = save_tiny_vae("ltx-video", folder / "ltx-video-vae", scaling_factor=SCALING_FACTOR)
    root = folder / "cache"
    overrides = ("tokenizer.name=ltx-video", f"tokenizer.checkpoint={weights}", "tokenizer.precision=fp32",
                 "frames.width=64")
    build_quietly(tiny_config(table, root, modalities=("rgb",), overrides=overrides))
    return root, weights


def test_each_sample_is_the_trainers_packed_latent_dict_with_the_unscaled_normalised_mean(ltx_video_cache, tmp_path):
    root, weights = ltx_video_cache
    out = tmp_path / "precomputed"
    report = export_cache(root, "ltx-video-trainer", out, ["rgb"])
    manifest = read_manifest(root)
    files = sorted((out / "latents").glob("**/*.pt"))  # PrecomputedDataset's glob
    assert (report.samples, report.written, len(files)) == (len(manifest), len(manifest), len(manifest))
    assert not (out / "conditions").exists()  # the trainer's own caption preprocessing writes them
    factor = json.loads((weights / "config.json").read_text())["scaling_factor"]
    config = json.loads((root / "cache_config.json").read_text())
    for index, (path, row) in enumerate(zip(files, manifest)):
        assert path.relative_to(out / "latents").as_posix() == f"{index:09d}.pt"
        data = torch.load(path, map_location="cpu", weights_only=True)
        assert set(data) == TRAINER_KEYS
        assert all(type(data[key]) is int for key in ("num_frames", "height", "width"))
        assert (data["num_frames"], data["height"], data["width"]) == (2, 1, 2)
        fps = row["provenance"]["source_fps"] if config["frames"]["fps"] == "source" else float(config["frames"]["fps"])
        assert type(data["fps"]) is float and data["fps"] == fps
        with h5py.File(root / row["shard_path"], "r") as shard:
            stored = torch.from_numpy(shard[config["latent"]["dataset"]][row["cache_row"]])
        expected = pack_latents((stored.float() / factor).to(torch.bfloat16)[None])[0]
        assert data["latents"].dtype == torch.bfloat16 and data["latents"].shape == (2 * 1 * 2, 128)
        assert torch.equal(data["latents"], expected)


def test_a_cache_of_another_family_or_record_is_refused_before_the_folder_exists(tmp_path):
    build_cache(tmp_path / "wan", make_samples(), tokenizer=WAN21_TOKENIZER)
    with pytest.raises(ConfigError, match=r"wan2.1 tokenizer .* the ltx-video-trainer target writes ltx-video "
                                          r"latents only. Targets that take this cache: musubi, pt-dicts"):
        export_cache(tmp_path / "wan", "ltx-video-trainer", tmp_path / "out", ["rgb"])
    unrecorded = {"name": "ltx-video", "checkpoint_sha256": None, "precision": "fp32", "scaling_factor": 1.0}
    build_cache(tmp_path / "ltx", make_samples(), tokenizer=unrecorded)
    with pytest.raises(ConfigError, match="records its latent as None.* ltx-video-trainer target .*can only convert"):
        export_cache(tmp_path / "ltx", "ltx-video-trainer", tmp_path / "out", ["rgb"])
    assert not (tmp_path / "out").exists()


def test_a_latent_of_other_than_128_channels_is_refused_naming_the_fix(tmp_path):
    recorded = {"name": "ltx-video", "checkpoint_sha256": None, "precision": "fp32", "scaling_factor": 1.0,
                "latent": "posterior mean mu, (mu - latents_mean) * scaling_factor / latents_std per channel",
                "latents_mean": [0.0] * 128, "latents_std": [1.0] * 128}
    build_cache(tmp_path / "ltx", make_samples(), tokenizer=recorded)
    with pytest.raises(ConfigError, match="has 16 channels, and the LTX-Video transformer takes 128"):
        export_cache(tmp_path / "ltx", "ltx-video-trainer", tmp_path / "out", ["rgb"])
    assert not (tmp_path / "out").exists()
