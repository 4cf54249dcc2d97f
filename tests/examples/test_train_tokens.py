"""examples/train_tokens.py learns a discrete-token cache: held-out next-token loss falls well below step 0 and the
unigram baseline; the model is causal; its probabilities over the whole vocabulary sum to 1; the sequences it trains
on are the stored ids, read here with h5py, in (t, h, w) raster order. (On the demo's token cache:
tests/demo/test_demo_tokens.py.)"""

from __future__ import annotations

import h5py
import numpy as np
import torch
from torch.nn import functional as F

from helpers.examples import load_train_tokens
from helpers.fake_cache import manifest_rows
from latentforge import LatentCacheDataset


def test_tiny_next_token_model_learns_a_token_cache(tmp_path):
    example = load_train_tokens()
    root = example.synthetic_token_cache(tmp_path)
    result = example.train(root, steps=300, held_out=8, log_every=0)
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
    model = example.TinyTokenModel(levels=(4, 4), grid=(2, 1, 5), length=10).eval()  # 16 ids, 2 frames of 5 cells
    ids = torch.randint(16, (1, 10))
    changed = ids.clone()
    changed[0, 6] = (ids[0, 6] + 1) % 16
    with torch.no_grad():
        before, after = model(ids), model(changed)
    assert torch.equal(before[0, :6], after[0, :6])  # nothing before position 6 sees it
    assert not torch.allclose(before[0, 6:], after[0, 6:])
    assert np.isfinite(before.numpy()).all()


def test_the_digit_probabilities_are_a_distribution_over_every_id():
    """The loss of an id is the sum of its digits' cross-entropies: exp(-loss) over all 64,000 ids of the Cosmos DV
    levels sums to 1 at every position, and the loss equals -log of the id's own probability so computed."""
    example = load_train_tokens()
    torch.manual_seed(0)
    levels = (8, 8, 8, 5, 5, 5)
    model = example.TinyTokenModel(levels=levels, grid=(2, 1, 3), length=6).eval()
    ids = torch.randint(64000, (1, 6))
    with torch.no_grad():
        parts = [F.log_softmax(p, dim=-1) for p in model(ids[:, :-1]).split(levels, dim=-1)]
        every_id = torch.arange(64000)
        digits = torch.stack([every_id // int(np.prod(levels[:c])) % n for c, n in enumerate(levels)], dim=-1)
        log_p = sum(part[0][:, digits[:, c]] for c, part in enumerate(parts))  # [positions, 64000]
        loss = example.next_token_loss(model, ids)
    assert torch.allclose(log_p.exp().sum(dim=-1), torch.ones(5), atol=1e-4)
    expected = -log_p[torch.arange(5), ids[0, 1:]].mean()
    assert torch.allclose(loss, expected, atol=1e-5)
