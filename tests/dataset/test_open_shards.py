"""A Dataset keeps at most `max_open_shards` shards open: it reads a cache of more shards than the process may open
files, which a reader that never closed a shard could not (checked in a child whose open-file limit is lowered)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers.exec_world import cli_env, exec_config, make_table
from latentforge.builder.run import build

READ_ALL = """
import os, resource, sys
from latentforge import LatentCacheDataset
limit = len(os.listdir("/proc/self/fd")) + 8
resource.setrlimit(resource.RLIMIT_NOFILE, (limit, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
dataset = LatentCacheDataset(sys.argv[1], max_open_shards=int(sys.argv[2]))
for _ in range(2):
    ids = [dataset[i]["sample_id"] for i in range(len(dataset))]
print(len(set(ids)), len(dataset._reader()._files))
"""


@pytest.fixture(scope="module")
def many_shards(tmp_path_factory):
    folder = tmp_path_factory.mktemp("open-shards")
    root = folder / "cache"
    build(exec_config(make_table(folder / "data", count=12), root, "output.rows_per_shard=1"), quiet=True)
    assert len(list((root / "shards").iterdir())) == 12
    return root


@pytest.mark.parametrize("bound, ok", [(4, True), (64, False)])
def test_more_shards_than_open_files(many_shards, bound, ok):
    done = subprocess.run([sys.executable, "-c", READ_ALL, str(many_shards), str(bound)], capture_output=True,
                          text=True, env=cli_env(), timeout=120)
    if ok:
        assert done.returncode == 0 and done.stdout.split() == ["12", "4"], done.stderr[-2000:]
    else:  # the bound is above the limit: the reader runs out of descriptors, as every reader did before
        assert done.returncode != 0 and "Too many open files" in done.stderr, done.stderr[-2000:]
