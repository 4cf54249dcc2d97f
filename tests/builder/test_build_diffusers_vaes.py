"""Builds with the diffusers-class tokenizers (tiny random models of the real architectures, saved as diffusers
folders; tests/tokenizers/test_diffusers_vaes.py proves them equal to diffusers): the cache verifies,
deep-verifies by re-encoding its sources bit for bit, computes statistics, records the normalisation in
cache_config.json and opens in the Dataset with a trainer's expectation."""

from __future__ import annotations

import hashlib
import json

import pytest

from helpers.builds import build_quietly, read_manifest, tiny_config, tiny_world, write_table
from helpers.tiny_diffusers_vaes import save_tiny_vae
from latentforge import LatentCacheDataset, stats, verify
from latentforge.verification.quality import QualityThresholds

# Random weights cannot reconstruct anything: the quality floor is off, every other deep check stays on.
NO_QUALITY_FLOOR = QualityThresholds(fail_psnr=-1e9, warn_psnr=-1e9, fail_ssim=-1e9, warn_ssim=-1e9)
# 9 frames of 32x64: valid for the 4x16x16 and the 8x32x32 models; batches of two clips
LATENTS = {"hunyuanvideo1.5": (32, 3, 2, 4), "ltx-video": (128, 2, 1, 2)}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    folder = tmp_path_factory.mktemp("diffusers-vae-build")
    return folder, write_table(tiny_world(folder / "world"), folder / "world" / "samples.csv")


@pytest.fixture(scope="module", params=list(LATENTS))
def built(request, world):
    name = request.param
    folder, table = world
    weights = save_tiny_vae(name, folder / f"{name}-vae")
    root = folder / f"{name}-cache"
    overrides = (f"tokenizer.name={name}", f"tokenizer.checkpoint={weights}", "tokenizer.precision=fp32",
                 "frames.width=64")
    build_quietly(tiny_config(table, root, modalities=("rgb",), overrides=overrides))
    return name, weights, root


def test_build_verifies_deep_verifies_and_loads(built, tmp_path):
    name, weights, root = built
    assert len(read_manifest(root)) == 3  # the 6-frame clip is rejected
    assert verify(root).ok
    report = verify(root, deep=True, indices=[0, 2], thresholds=NO_QUALITY_FLOOR)
    assert report.ok, [(c.name, c.detail) for c in report.failures]
    assert "exact" in report.comparison

    sha = hashlib.sha256((weights / "diffusion_pytorch_model.safetensors").read_bytes()).hexdigest()
    recorded = json.loads((root / "cache_config.json").read_text())["tokenizer"]
    assert json.dumps(recorded).count(sha) >= 1
    text = json.dumps(recorded)
    assert "scaling_factor" in text and ("latents_std" in text) == name.startswith("ltx")

    expect = {"tokenizer_family": name, "tokenizer_sha256": sha, "latent_shape": LATENTS[name]}
    item = LatentCacheDataset(root, expect=expect)[0]
    assert tuple(item["latent"].shape) == LATENTS[name]
    summary = stats(root, out=tmp_path / "stats")
    assert summary is not None
