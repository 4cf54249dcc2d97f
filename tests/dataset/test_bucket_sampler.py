"""BucketBatchSampler: one bucket per batch, every sample once per epoch, replicas disjoint with equal steps,
exact mid-epoch resume (also on another replica count), token budgets and weights; and a tiny training run
through examples/train_buckets.py that draws batches above 1 from several buckets."""

from __future__ import annotations

from collections import Counter

import pytest

from helpers.examples import load_train_buckets
from latentforge.dataset import BucketBatchSampler, BucketedLatentDataset
from latentforge.errors import ConfigError

SIZES = {"a": 7, "b": 5, "c": 4}
OFFSETS = {"a": range(0, 7), "b": range(7, 12), "c": range(12, 16)}


def _bucket(batch: list[int]) -> str:
    names = {name for name, span in OFFSETS.items() for i in batch if i in span}
    assert len(names) == 1, batch
    return names.pop()


def test_an_epoch_holds_every_sample_once_in_single_bucket_batches():
    sampler = BucketBatchSampler(SIZES, {"a": 3, "b": 2, "c": 4}, seed=3)
    sampler.set_epoch(1)
    batches = list(sampler)
    assert sorted(i for b in batches for i in b) == list(range(16))
    assert all(len(b) == {"a": 3, "b": 2, "c": 4}[_bucket(b)] or len(b) < 3 for b in batches)
    sampler.set_epoch(2)
    assert list(sampler) != batches  # reshuffled per epoch, same content
    assert sorted(i for b in sampler for i in b) == list(range(16))


def test_replicas_share_no_batch_and_take_the_same_steps():
    per_rank = [list(BucketBatchSampler(SIZES, 2, seed=0, num_replicas=3, rank=r)) for r in range(3)]
    assert len({len(batches) for batches in per_rank}) == 1
    seen = [i for batches in per_rank for b in batches for i in b]
    assert len(seen) == len(set(seen))


@pytest.mark.parametrize("replicas_after", [1, 2, 4])
def test_resume_mid_epoch_yields_exactly_the_rest(replicas_after):
    full = BucketBatchSampler(SIZES, 2, seed=5)
    full.set_epoch(4)
    expected = full.epoch_batches()
    before = [BucketBatchSampler(SIZES, 2, seed=5, num_replicas=2, rank=r) for r in range(2)]
    taken = []
    for sampler in before:
        sampler.set_epoch(4)
        iterator = iter(sampler)
        taken += [next(iterator) for _ in range(2)]
    state = before[0].state_dict()
    assert state["position"] == 4
    after = [BucketBatchSampler(SIZES, 2, seed=5, num_replicas=replicas_after, rank=r) for r in range(replicas_after)]
    rest = []
    for sampler in after:
        sampler.load_state_dict(state)
        sampler.set_epoch(4)
        rest += list(sampler)
    usable = len(expected) - (len(expected) - 4) % replicas_after
    assert sorted(map(tuple, taken + rest)) == sorted(map(tuple, expected[:usable]))


def test_resume_refuses_other_settings():
    state = BucketBatchSampler(SIZES, 2, seed=5).state_dict()
    with pytest.raises(ConfigError, match="batch_sizes"):
        BucketBatchSampler(SIZES, 3, seed=5).load_state_dict(state)


def test_token_budget_and_weights():
    sampler = BucketBatchSampler(SIZES, token_budget=100, tokens_per_sample={"a": 50, "b": 20, "c": 200})
    assert sampler.batch_sizes == [2, 5, 1]
    weighted = BucketBatchSampler(SIZES, 1, weights={"a": 0.0, "b": 0.0, "c": 1.0}, seed=1)
    batches = weighted.epoch_batches()
    assert len(batches) == 16 and Counter(map(_bucket, batches)) == {"c": 16}
    with pytest.raises(ConfigError, match="either batch_size or token_budget"):
        BucketBatchSampler(SIZES)


@pytest.mark.parametrize("seed", range(8))
def test_weights_never_draw_a_bucket_without_batches(seed):
    sizes = {"a": 3, "empty": 0, "short": 1}  # "short" has no batch of 2 under drop_last
    sampler = BucketBatchSampler(sizes, 2, weights={"a": 1.0, "empty": 5.0, "short": 5.0}, seed=seed, drop_last=True)
    batches = sampler.epoch_batches()
    assert len(batches) == 1 and all(len(b) == 2 and set(b) <= {0, 1, 2} for b in batches)
    with pytest.raises(ConfigError, match="only for buckets without a batch"):
        BucketBatchSampler(sizes, 2, weights={"a": 0.0, "empty": 1.0, "short": 1.0}, drop_last=True).epoch_batches()


def test_tiny_training_draws_batches_above_one_from_several_buckets(bucketed_cache):
    example = load_train_buckets()
    run = example.train_buckets(bucketed_cache, steps=8, batch_size=2, log_every=0)
    assert len(run.draws) == 8
    above_one = {bucket for bucket, size in run.draws if size > 1}
    assert len(above_one) >= 3
    assert all(loss == loss for loss in run.losses)  # finite
    dataset = BucketedLatentDataset(bucketed_cache)
    assert dataset.bucket_sizes == {"17x32x64": 2, "17x64x32": 2, "17x48x48": 3, "9x32x64": 1}
    with pytest.raises(ConfigError, match="mixes buckets"):
        dataset.__getitems__([0, 2])
