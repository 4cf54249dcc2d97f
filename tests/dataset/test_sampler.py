"""ResumableSampler: equals torch's DistributedSampler on fresh epochs, resumes exactly, covers DDP x workers."""

from __future__ import annotations

import itertools

import pytest
from torch.utils.data import DataLoader, DistributedSampler

from helpers.fake_cache import write_fake_cache
from latentforge.dataset import LatentCacheDataset, ResumableSampler, collate_latent_batch
from latentforge.errors import ConfigError


@pytest.mark.parametrize("num_samples,replicas,shuffle,drop_last", [
    (n, r, s, d) for n, r, s, d in itertools.product((1, 7, 24), (1, 2, 3), (True, False), (True, False))
    if not (d and n < r)
])
def test_fresh_epochs_equal_torch_distributed_sampler(num_samples, replicas, shuffle, drop_last):
    for rank in range(replicas):
        ours = ResumableSampler(num_samples, replicas, rank, shuffle=shuffle, seed=5, drop_last=drop_last)
        ref = DistributedSampler(range(num_samples), replicas, rank, shuffle=shuffle, seed=5, drop_last=drop_last)
        for epoch in (0, 3):
            ours.set_epoch(epoch)
            ref.set_epoch(epoch)
            assert list(ours) == list(ref)
            assert len(ours) == len(ref)


def test_resumed_sampler_yields_exactly_the_remaining_indices():
    sampler = ResumableSampler(23, seed=1)
    sampler.set_epoch(2)
    full = list(sampler)
    iterator = iter(sampler)
    taken = [next(iterator) for _ in range(9)]
    state = sampler.state_dict()
    resumed = ResumableSampler(23, seed=1)
    resumed.load_state_dict(state)
    resumed.set_epoch(2)  # the usual loop calls set_epoch(resumed epoch) first: the position survives it
    assert taken + list(resumed) == full
    assert len(list(resumed)) == 23  # the iteration after the resumed one is a whole epoch again
    resumed.load_state_dict(state)
    resumed.set_epoch(3)  # a different epoch starts from its beginning
    assert sorted(resumed) == list(range(23))


def test_resume_across_replicas_and_a_changed_world_size():
    num_samples = 29  # 29 over two replicas pads; the 21 left split evenly over three
    order = list(DistributedSampler(range(num_samples), 1, 0, seed=0))
    ranks = [ResumableSampler(num_samples, 2, rank) for rank in range(2)]
    consumed = [list(itertools.islice(iter(s), 4)) for s in ranks]
    states = [s.state_dict() for s in ranks]
    assert states[0] == states[1] and states[0]["position"] == 8
    assert sorted(consumed[0] + consumed[1]) == sorted(order[:8])
    resumed = []
    for rank in range(3):  # resumed on three replicas instead of two
        sampler = ResumableSampler(num_samples, 3, rank)
        sampler.load_state_dict(states[0])
        resumed += list(sampler)
    assert sorted(resumed) == sorted(order[8:])


def test_state_from_consumed_batches_behind_a_prefetching_loader():
    sampler = ResumableSampler(40, seed=2)
    full = list(sampler)
    loader = DataLoader(range(40), batch_size=4, sampler=sampler)
    iterator = iter(loader)
    seen = [x for _ in range(3) for x in next(iterator).tolist()]
    state = sampler.state_dict(consumed=len(seen))
    resumed = ResumableSampler(40, seed=2)
    resumed.load_state_dict(state)
    assert seen + list(resumed) == full


def test_state_of_another_run_is_refused():
    state = ResumableSampler(10, seed=1).state_dict()
    with pytest.raises(ConfigError, match="seed=1 but this sampler has 0"):
        ResumableSampler(10, seed=0).load_state_dict(state)


def test_two_replicas_with_two_workers_cover_every_index_once(tmp_path):
    root = write_fake_cache(tmp_path / "c", num_samples=22, rows_per_shard=8)
    dataset = LatentCacheDataset(root)
    seen = []
    for rank in range(2):
        sampler = ResumableSampler(len(dataset), num_replicas=2, rank=rank, seed=3)
        loader = DataLoader(dataset, batch_size=3, sampler=sampler, num_workers=2, collate_fn=collate_latent_batch)
        seen += [i for batch in loader for i in batch["dataset_index"].tolist()]
    assert sorted(seen) == list(range(22))
