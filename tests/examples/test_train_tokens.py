"""examples/train_tokens.py learns a discrete-token cache: held-out next-token loss falls well below step 0 and the
unigram baseline; the model is causal; the sequences it trains on are the stored ids, read here with h5py, in
(t, h, w) raster order."""

from __future__ import annotations

import h5py
import numpy as np
import torch

from helpers.examples import load_train_tokens
from helpers.fake_cache import manifest_rows
from latentforge import LatentCacheDataset


def test_tiny_next_token_model_learns_a_token_cache(tmp_path):
    example = load_train_tokens()
    root = example.synthetic_token_cache(tmp_path)
    result = example.train(root, steps=40, held_out=8, log_every=0, width=32, layers=1)
    assert result.final_loss < 0.6 * result.step0_loss
    assert result.final_loss < 0.6 * result.unigram_loss
    assert result.vocabulary == 256

    rows = manifest_rows(root)
    dataset = LatentCacheDataset(root, flatten_tokens=True)
    stored = []
    for index in result.held_out:
        row = rows[index]
        with h5py.File(root / row["shard_path"], "r") as shard:
            grid = shard["perception_latent_state"][row["cache_row"]]  # [1, T', H', W'] uint16
        stored.append([int(grid[0, t, h, w]) for t in range(grid.shape[1]) for h in range(grid.shape[2])
                       for w in range(grid.shape[3])])
    assert torch.equal(example.sequences_of(dataset, result.held_out), torch.tensor(stored))


def test_the_model_is_causal():
    example = load_train_tokens()
    torch.manual_seed(0)
    model = example.TinyTokenModel(vocabulary=16, length=10).eval()
    ids = torch.randint(16, (1, 10))
    changed = ids.clone()
    changed[0, 6] = (ids[0, 6] + 1) % 16
    with torch.no_grad():
        before, after = model(ids), model(changed)
    assert torch.equal(before[0, :6], after[0, :6])  # nothing before position 6 sees it
    assert not torch.allclose(before[0, 6:], after[0, 6:])
    assert np.isfinite(before.numpy()).all()
