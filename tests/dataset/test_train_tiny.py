"""examples/train_tiny.py learns from a cache: held-out loss falls well below step 0 and the mean-velocity baseline.

The held-out check is recomputed here on rows read with h5py, with noise drawn here, so a bug in the example's
own evaluation cannot pass it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from helpers.examples import load_train_tiny
from helpers.fake_cache import h5py_row, manifest_rows, write_fake_cache


def _load_example():
    return load_train_tiny()


def _h5py_batch(root: Path, indices: list[int]) -> dict[str, torch.Tensor]:
    rows = manifest_rows(root)
    stored = [h5py_row(root, rows[i]) for i in indices]
    latent = torch.from_numpy(np.stack([s["perception_latent_state"] for s in stored]))
    lengths = torch.tensor([int(s["t5_text_length"]) for s in stored])
    return {
        "latent": latent,
        "conditioning_latent": latent[:, :16, :1],
        "text_embeddings": torch.from_numpy(np.stack([s["t5_text_embeddings"] for s in stored])),
        "text_mask": torch.arange(16)[None] < lengths[:, None],
    }


def test_tiny_trainer_beats_step0_and_mean_velocity(tmp_path):
    example = _load_example()
    root = write_fake_cache(tmp_path / "c", num_samples=96, rows_per_shard=32)
    result = example.train(root, steps=150, held_out=16, log_every=0)
    assert result.final_loss <= 0.7 * result.step0_loss
    assert result.final_loss < result.mean_velocity_loss

    train = _h5py_batch(root, list(range(80)))
    held = _h5py_batch(root, result.held_out)
    assert result.held_out == list(range(80, 96))
    generator = torch.Generator().manual_seed(123)
    noise = torch.randn(held["latent"].shape, generator=generator)
    t = torch.rand(noise.shape[0], generator=generator)
    mean_velocity = train["latent"].float().mean(0).expand_as(noise)
    with torch.no_grad():
        model_loss = float(example.flow_matching_loss(result.model, held, noise, t))
        baseline = float(((mean_velocity - (held["latent"].float() - noise)) ** 2).mean())
    assert model_loss < 0.8 * baseline
