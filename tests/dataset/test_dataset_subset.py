"""LatentCacheDataset(where=...): the rows a manifest query selects, read exactly as the whole dataset reads them."""

from __future__ import annotations

import json

import pytest
import torch

from helpers.fake_cache import write_fake_cache
from latentforge.dataset import LatentCacheDataset


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return write_fake_cache(tmp_path_factory.mktemp("subset") / "root", num_samples=12, rows_per_shard=5)


def test_where_keeps_the_selected_rows_in_order(root):
    rows = [json.loads(line) for line in (root / "manifest.jsonl").read_text(encoding="utf-8").splitlines()]
    want = [r["dataset_index"] for r in rows if r["source_index"] % 3 == 1]
    whole = LatentCacheDataset(root)
    subset = LatentCacheDataset(root, where="source_index % 3 = 1")
    assert 0 < len(subset) == len(want) < len(whole)
    for item, index in enumerate(want):
        got, ref = subset[item], whole[index]
        assert got["dataset_index"] == index and got["sample_id"] == ref["sample_id"]
        assert torch.equal(got["latent"], ref["latent"])
    with pytest.raises(IndexError, match=f"item {len(want)} is out of range for a dataset of {len(want)} samples"):
        subset[len(want)]
