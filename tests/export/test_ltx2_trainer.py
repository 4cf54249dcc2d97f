"""`export --to ltx2-trainer`: a cache built with a tiny LTX-2 video VAE (diffusers' AutoencoderKLLTX2Video, random
weights and latent statistics) exported, its files read back the way the LTX-2 trainer reads them and checked
against what its own preprocessing writes (Lightricks/LTX-2 400fd31, packages/ltx-trainer):

- ltx_trainer/datasets.py PrecomputedDataset: `latents/**/*.pt` globbed, each loaded with
  `torch.load(..., weights_only=True)`, a 4-D `latents` taken as [C, F, H, W], its text at `conditions/{same name}`;
- scripts/process_videos.py compute_latents: {latents, num_frames, height, width, fps}, the grid as ints, the
  latent bfloat16 (the VAE loaded in bfloat16, its output saved uncast);
- ltx_core VideoEncoder.forward: the posterior mean normalised as `(mu - mean-of-means) / std-of-means`, which is
  the cache's latent over the VAE config's scaling_factor (read here from the VAE folder, not the cache).

bench/tools/ltx2_trainer_check.py loads an export with the trainer's own PrecomputedDataset (docs/export.md has the
result); the trainer is not on PyPI, so the suite checks the same facts without it."""

from __future__ import annotations

import json

import h5py
import pytest
import torch
from safetensors.torch import load_file

from helpers.builds import build_quietly, read_manifest, tiny_config, tiny_world, write_table
from helpers.fake_rows import WAN21_TOKENIZER, build_cache, make_samples
from helpers.tiny_diffusers_vaes import save_tiny_vae
from latentforge.errors import ConfigError
from latentforge.export import export_cache

SCALING_FACTOR = 0.7  # not 1.0 (the released VAE's), so the division is seen
TRAINER_KEYS = {"latents", "num_frames", "height", "width", "fps"}


@pytest.fixture(scope="module")
def ltx2_cache(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ltx2-trainer")
    table = write_table(tiny_world(folder / "world"), folder / "world" / "samples.csv")
    weights = save_tiny_vae("ltx2", folder / "ltx2-vae", scaling_factor=SCALING_FACTOR)
    root = folder / "cache"
    overrides = ("tokenizer.name=ltx2", f"tokenizer.checkpoint={weights}", "tokenizer.precision=fp32",
                 "frames.width=64")
    build_quietly(tiny_config(table, root, modalities=("rgb",), overrides=overrides))
    return root, weights


def test_each_sample_is_the_trainers_latent_dict_with_the_unscaled_normalised_mean(ltx2_cache, tmp_path):
    root, weights = ltx2_cache
    out = tmp_path / "precomputed"
    report = export_cache(root, "ltx2-trainer", out, ["rgb"])
    manifest = read_manifest(root)
    files = sorted((out / "latents").glob("**/*.pt"))  # PrecomputedDataset's glob
    assert (report.samples, report.written, len(files)) == (len(manifest), len(manifest), len(manifest))
    assert not (out / "conditions").exists()  # the trainer's own text preprocessing writes them
    assert not (out / "audio_latents").exists()  # a cache without audio latents: video only, as before
    factor = json.loads((weights / "config.json").read_text())["scaling_factor"]
    config = json.loads((root / "cache_config.json").read_text())
    for index, (path, row) in enumerate(zip(files, manifest)):
        assert path.relative_to(out / "latents").as_posix() == f"{index:09d}.pt"
        data = torch.load(path, map_location="cpu", weights_only=True)
        assert set(data) == TRAINER_KEYS
        latents = data["latents"]
        assert latents.dtype == torch.bfloat16 and latents.dim() == 4  # [C, F, H, W], not the legacy [seq, C]
        assert tuple(latents.shape) == (128, data["num_frames"], data["height"], data["width"]) == (128, 2, 1, 2)
        assert all(type(data[key]) is int for key in ("num_frames", "height", "width"))
        fps = row["provenance"]["source_fps"] if config["frames"]["fps"] == "source" else float(config["frames"]["fps"])
        assert type(data["fps"]) is float and data["fps"] == fps
        with h5py.File(root / row["shard_path"], "r") as shard:
            stored = torch.from_numpy(shard[config["latent"]["dataset"]][row["cache_row"]])
        assert torch.equal(latents, (stored.float() / factor).to(torch.bfloat16))


def test_the_latent_is_the_encoders_mean_over_the_vaes_own_statistics(ltx2_cache):
    """(mu - latents_mean) / latents_std from the cache's own record inverted: the same numbers."""
    root, weights = ltx2_cache
    tokenizer = json.loads((root / "cache_config.json").read_text())["tokenizer"]
    buffers = load_file(str(weights / "diffusion_pytorch_model.safetensors"))
    assert torch.equal(torch.tensor(tokenizer["latents_std"]), buffers["latents_std"].float())
    assert torch.equal(torch.tensor(tokenizer["latents_mean"]), buffers["latents_mean"].float())


def test_a_cache_of_another_family_or_record_is_refused_before_the_folder_exists(tmp_path):
    build_cache(tmp_path / "wan", make_samples(), tokenizer=WAN21_TOKENIZER)
    with pytest.raises(ConfigError, match=r"wan2.1 tokenizer .* the ltx2-trainer target writes ltx2 latents only"):
        export_cache(tmp_path / "wan", "ltx2-trainer", tmp_path / "out", ["rgb"])
    unrecorded = {"name": "ltx2", "checkpoint_sha256": None, "precision": "fp32", "scaling_factor": 1.0}
    build_cache(tmp_path / "ltx2", make_samples(), tokenizer=unrecorded)
    with pytest.raises(ConfigError, match="records its latent as None.*can only convert those"):
        export_cache(tmp_path / "ltx2", "ltx2-trainer", tmp_path / "out", ["rgb"])
    assert not (tmp_path / "out").exists()


def test_a_latent_of_other_than_128_channels_is_refused_naming_the_fix(tmp_path):
    """16-channel generated rows under a full ltx2 record: the LTX-2 DiT takes the VAE's 128 channels only."""
    recorded = {"name": "ltx2", "checkpoint_sha256": None, "precision": "fp32", "scaling_factor": 1.0,
                "latent": "posterior mean mu, (mu - latents_mean) * scaling_factor / latents_std per channel",
                "latents_mean": [0.0] * 128, "latents_std": [1.0] * 128}
    build_cache(tmp_path / "ltx2", make_samples(), tokenizer=recorded)
    with pytest.raises(ConfigError, match="has 16 channels, and the LTX-2 video DiT takes 128, one modality"):
        export_cache(tmp_path / "ltx2", "ltx2-trainer", tmp_path / "out", ["rgb"])
    assert not (tmp_path / "out").exists()
