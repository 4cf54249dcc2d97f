"""A build with a Cosmos tokenizer end to end: a tiny table dataset encoded by cosmos-cv8x8x8 from a released-style
hub folder (our modules traced at width 2, random weights), then `latentforge verify` and a deep verify, whose
re-encode compares the stored rows with a fresh encode bit for bit. The discrete tokenizers' token caches:
test_build_cosmos_tokens.py."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from helpers.builds import build_quietly, read_manifest, tiny_config, tiny_world, write_table
from latentforge.cli.main import main
from latentforge.demo.tiny_tokenizer import save_hub_folder, seeded_weights
from latentforge.tokenizers.cosmos.architecture import released
from latentforge.tokenizers.cosmos.model import CosmosVideoAutoencoder
from latentforge.verification.deep import verify_deep
from latentforge.verification.quality import QualityThresholds


@pytest.mark.slow  # a whole build and a deep verify: ~18 s on a shared CPU
def test_a_cosmos_cache_builds_and_verifies(tmp_path):
    family, channels, name = "CV", 16, "cosmos-cv8x8x8"
    model = seeded_weights(CosmosVideoAutoencoder(released(family, 8, 8).narrowed(2, (2, 4, 4), 1, 16)).eval(), seed=12)
    checkpoint = save_hub_folder(tmp_path / f"Cosmos-Tokenizer-{family}8x8x8", model)
    table = write_table(tiny_world(tmp_path / "world", clips=2)[:1], tmp_path / "world" / "samples.csv")
    root = tmp_path / "cache"
    build_quietly(tiny_config(table, root, modalities=("rgb",), overrides=(
        f"tokenizer.name={name}", f"tokenizer.checkpoint={checkpoint}", "frames.num_frames=9",
        "frames.height=16", "frames.width=16", "output.latent_dataset=video_latent_state")))

    recorded = json.loads((root / "cache_config.json").read_text())["tokenizer"]
    assert recorded["name"] == name and recorded["checkpoint_format"] == "jit-folder"
    (row,) = read_manifest(root)
    with h5py.File(root / row["shard_path"], "r") as shard:
        stored = shard["video_latent_state"][row["cache_row"]]
    assert stored.shape == (channels, 2, 2, 2) and np.abs(stored).max() > 0.1  # 1 + 8/8 latent frames of 16/8 px

    assert main(["verify", str(root)]) == 0
    anything = QualityThresholds(-np.inf, -np.inf, -np.inf, -np.inf)  # random weights decode to noise
    report = verify_deep(root, spot=1, thresholds=anything)
    assert report.ok, report.failures
    assert report.comparison.startswith("exact")
    assert {check.name for check in report.checks} >= {"reencode", "latent_frame0", "quality"}
