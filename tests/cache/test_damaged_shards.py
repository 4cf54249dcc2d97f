"""A shard cut short: every verb that reads shards (preview, export, stats, inspect) and the training Dataset stop
with one line naming the shard and the fix, a typed DamagedFile, never h5py's bare OSError naming no file."""

from __future__ import annotations

import os

import pytest

from latentforge.errors import DamagedFile
from latentforge.sinks.hdf5.dataset import LatentCacheDataset


@pytest.fixture
def cut(cache):
    shard = sorted((cache / "shards").iterdir())[0]
    os.truncate(shard, shard.stat().st_size // 3)
    return cache, shard


@pytest.mark.parametrize("verb", [["preview", "--samples", "1"], ["export", "--to", "pt-dicts", "OUT"], ["stats"],
                                  ["inspect"]], ids=lambda verb: verb[0])
def test_a_verb_names_the_cut_shard(cut, cli, tmp_path, verb):
    cache, shard = cut
    args = [verb[0], str(cache), *[str(tmp_path / "out") if a == "OUT" else a for a in verb[1:]]]
    done = cli(args)
    assert done.returncode == 1, done.stdout + done.stderr
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("error")]
    assert f"{shard} is damaged (" in line and "truncated file" in line and "latentforge verify" in line, line


def test_the_dataset_raises_a_typed_error_naming_the_shard(cut):
    cache, shard = cut
    dataset = LatentCacheDataset(cache)
    with pytest.raises(DamagedFile, match=f"{shard} is damaged .*rebuild the cache, or fetch it again"):
        for index in range(len(dataset)):
            dataset[index]
