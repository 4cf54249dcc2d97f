"""BucketBatchSampler and BucketedLatentDataset behind a torch DataLoader with two worker processes: every batch
holds one bucket and the rows its indices name (read back with h5py through the bucket's manifest), an epoch covers
every sample once, and a run stopped mid-epoch (with batches prefetched past the stop) resumes with exactly the
batches it had not trained on."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
from torch.utils.data import DataLoader

from latentforge.dataset import BucketBatchSampler, BucketedLatentDataset, collate_latent_batch

SEED, EPOCH, STOP_AFTER = 7, 3, 2


def _loader(root: Path, state: dict | None = None) -> tuple[BucketBatchSampler, DataLoader]:
    dataset = BucketedLatentDataset(root)
    sampler = BucketBatchSampler(dataset.bucket_sizes, 2, seed=SEED)
    if state is not None:
        sampler.load_state_dict(state)
    sampler.set_epoch(EPOCH)
    return sampler, DataLoader(dataset, batch_sampler=sampler, num_workers=2, prefetch_factor=2,
                               collate_fn=collate_latent_batch)


def _stored_latent(root: Path, bucket: str, dataset_index: int) -> np.ndarray:
    folder = root / "buckets" / bucket
    config = json.loads((folder / "cache_config.json").read_text())
    row = json.loads((folder / "manifest.jsonl").read_text().splitlines()[dataset_index])
    with h5py.File(folder / row["shard_path"], "r") as shard:
        return shard[config["latent"]["dataset"]][row["cache_row"]]


def _keys(batch: dict) -> tuple[str, tuple[int, ...]]:
    assert len(set(batch["bucket"])) == 1, batch["bucket"]
    return batch["bucket"][0], tuple(batch["dataset_index"].tolist())


@pytest.fixture(scope="module")
def full_epoch(bucketed_cache) -> list[tuple[str, tuple[int, ...]]]:
    _, loader = _loader(bucketed_cache)
    epoch = []
    for batch in loader:
        bucket, indices = _keys(batch)
        for row, index in zip(batch["latent"].numpy(), indices):
            np.testing.assert_array_equal(row, _stored_latent(bucketed_cache, bucket, index).astype(row.dtype))
        epoch.append((bucket, indices))
    return epoch


def test_worker_batches_hold_one_bucket_and_every_sample_once(bucketed_cache, full_epoch):
    sizes = BucketedLatentDataset(bucketed_cache).bucket_sizes
    seen = sorted((bucket, i) for bucket, indices in full_epoch for i in indices)
    assert seen == sorted((bucket, i) for bucket, size in sizes.items() for i in range(size))
    assert any(len(indices) > 1 for _, indices in full_epoch)


def test_resume_behind_workers_yields_exactly_the_batches_not_trained_on(bucketed_cache, full_epoch):
    sampler, loader = _loader(bucketed_cache)
    trained = []
    for batch in loader:  # the workers have fetched batches past this point when the run stops
        trained.append(_keys(batch))
        if len(trained) == STOP_AFTER:
            break
    state = sampler.state_dict(consumed=len(trained))
    _, resumed = _loader(bucketed_cache, json.loads(json.dumps(state)))  # as a checkpoint would store it
    assert trained + [_keys(batch) for batch in resumed] == full_epoch
