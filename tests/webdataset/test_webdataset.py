"""The WebDataset sink and the streaming reader: the same staged units committed as HDF5 and as tar shards read
back bit for bit; tar shards written to a moto S3 server, a commit killed midway and rerun giving the same
objects, fetched and checked with sha256sum; exact mid-epoch resume over 2 ranks x 2 DataLoader workers."""

from __future__ import annotations

import subprocess
import tarfile

import boto3
import pytest
import torch
from moto.server import ThreadedMotoServer
from torch.utils.data import DataLoader

from helpers.fake_rows import (
    PLAN_REJECTS,
    empty_prompt_arrays,
    make_cache_config,
    make_samples,
    planned_units,
    stage_units,
)
from latentforge import LatentCacheDataset, StreamingLatentDataset
from latentforge.cache.expect import CacheMismatch
from latentforge.errors import ConfigError
from latentforge.sinks.hdf5.commit import commit_cache
from latentforge.sinks.webdataset import commit as wds_commit
from latentforge.sinks.webdataset.commit import WebDatasetOptions, commit_webdataset
from latentforge.transfer import Destination, FetchOptions, fetch

SHARD_BYTES = 6 * 1152 * 2  # about six samples of (48, 3, 6, 8) float16 per tar: several shards


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wds")
    units = stage_units(folder / "build", make_samples(), unit_size=6)
    hdf5 = folder / "hdf5"
    commit_cache(hdf5, units, PLAN_REJECTS, make_cache_config(), empty_prompt_arrays(), {}, planned_units(6))
    local = folder / "wds"
    commit_webdataset(Destination(f"file://{local}"), units, PLAN_REJECTS, make_cache_config(), empty_prompt_arrays(),
                      WebDatasetOptions(folder / "staging", shard_bytes=SHARD_BYTES), planned_units(6))
    return folder, units, hdf5, local


@pytest.fixture(scope="module")
def s3_options():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                          region_name="us-east-1")
    client.create_bucket(Bucket="wds")
    yield client, {"key": "testing", "secret": "testing", "endpoint_url": endpoint,
                   "client_kwargs": {"region_name": "us-east-1"}}
    server.stop()


def _fields(item):
    return {k: item[k] for k in ("latent", "text_embeddings", "text_length", "text_mask", "dataset_index",
                                 "source_index", "sample_id", "prompt")}


def test_webdataset_holds_the_hdf5_cache_bit_for_bit(staged):
    _, _, hdf5, local = staged
    assert subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=local).returncode == 0
    shards = sorted((local / "shards").iterdir())
    assert len(shards) >= 3
    with tarfile.open(shards[0]) as tar:  # the members webdataset's TarWriter writes, keys in order
        names = tar.getnames()
        assert names[:4] == ["000000000.json", "000000000.latent.npy", "000000000.length.cls", "000000000.text.npy"]
        assert all(member.mtime == 0 for member in tar.getmembers())
    padded = LatentCacheDataset(hdf5)
    streamed = list(StreamingLatentDataset(f"file://{local}"))
    assert [item["dataset_index"] for item in streamed] == list(range(len(padded)))
    for item in streamed:
        reference = _fields(padded[item["dataset_index"]])
        for key, value in _fields(item).items():
            assert torch.equal(value, reference[key]) if isinstance(value, torch.Tensor) else value == reference[key]
    empty = StreamingLatentDataset(f"file://{local}").empty_prompt()
    assert all(torch.equal(empty[key], padded.empty_prompt()[key]) for key in ("text_embeddings", "text_length",
                                                                              "text_mask"))
    channels = StreamingLatentDataset(f"file://{local}", modalities=["depth", "rgb"])
    first = next(iter(channels))["latent"]
    assert torch.equal(first, LatentCacheDataset(hdf5, modalities=["depth", "rgb"])[0]["latent"])


def test_a_killed_commit_to_s3_reruns_to_identical_objects_that_fetch_checks(staged, s3_options, monkeypatch,
                                                                             tmp_path):
    _, units, hdf5, local = staged
    client, options = s3_options
    real_put = wds_commit._put_tar
    puts = []

    def die_on_the_third_tar(*args, **kwargs):
        puts.append(args[1])
        if len(puts) == 3:
            raise KeyboardInterrupt  # a kill between two shards
        return real_put(*args, **kwargs)

    def commit():
        return commit_webdataset(Destination("s3://wds/cache", options), units, PLAN_REJECTS, make_cache_config(),
                                 empty_prompt_arrays(), WebDatasetOptions(tmp_path / "staging",
                                                                          shard_bytes=SHARD_BYTES, part_size=5 << 20),
                                 planned_units(6))

    monkeypatch.setattr(wds_commit, "_put_tar", die_on_the_third_tar)
    with pytest.raises(KeyboardInterrupt):
        commit()
    keys = [o["Key"] for o in client.list_objects_v2(Bucket="wds", Prefix="cache/")["Contents"]]
    assert len(keys) == 2 and "cache/_CACHE_COMPLETE" not in keys
    monkeypatch.setattr(wds_commit, "_put_tar", real_put)
    rerun = commit()
    assert sorted(rerun.kept) == sorted(k.removeprefix("cache/") for k in keys)
    objects = {o["Key"].removeprefix("cache/")
               for o in client.list_objects_v2(Bucket="wds", Prefix="cache/")["Contents"]}
    assert objects == {p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file()}
    for rel in objects - {"_CACHE_COMPLETE"}:
        body = client.get_object(Bucket="wds", Key=f"cache/{rel}")["Body"].read()
        assert body == (local / rel).read_bytes(), rel
    fetched = tmp_path / "fetched"
    fetch(Destination("s3://wds/cache", options), fetched, FetchOptions(require_success=False))
    assert subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=fetched).returncode == 0
    streamed = [i["dataset_index"] for i in StreamingLatentDataset("s3://wds/cache", options)]
    assert streamed == list(range(len(LatentCacheDataset(hdf5))))


def _stream_items(dataset):
    loader = DataLoader(dataset, batch_size=None, num_workers=2, multiprocessing_context="fork")
    return [(item["stream"], item["stream_index"], item["dataset_index"]) for item in loader]


def test_streaming_resumes_mid_epoch_at_exactly_the_next_sample_over_2_ranks_x_2_workers(staged):
    _, _, hdf5, local = staged
    url, everything = f"file://{local}", list(range(len(LatentCacheDataset(hdf5))))
    seen: list[int] = []
    for rank in (0, 1):
        full = _stream_items(StreamingLatentDataset(url, rank=rank, world_size=2, seed=7, shuffle_buffer=3))
        seen += [index for _, _, index in full]
        consumed: dict[int, int] = {}
        for stream, position, _ in full[:3]:  # a trainer stops after three items
            consumed[stream] = position + 1
        resumed = StreamingLatentDataset(url, rank=rank, world_size=2, seed=7, shuffle_buffer=3)
        resumed.load_state_dict({"epoch": 0, "consumed": consumed})
        rest = _stream_items(resumed)
        for stream in {s for s, _, _ in full}:
            after = [i for s, p, i in full if s == stream and p >= consumed.get(stream, 0)]
            assert [i for s, _, i in rest if s == stream] == after
    assert sorted(seen) == everything  # every sample once per epoch over all ranks and workers
    shuffled = [i for _, _, i in _stream_items(StreamingLatentDataset(url, seed=7, shuffle_buffer=3))]
    assert shuffled != everything and sorted(shuffled) == everything


def test_streaming_refuses_what_latent_cache_dataset_refuses(staged):
    _, _, hdf5, local = staged
    with pytest.raises(CacheMismatch, match="text_max_length"):
        StreamingLatentDataset(f"file://{local}", expect={"text_max_length": 512})
    with pytest.raises(ConfigError, match="unknown expect= key 'tokenizer'"):
        StreamingLatentDataset(f"file://{local}", expect={"tokenizer": "wan2.1"})
    with pytest.raises(ConfigError, match="not a WebDataset cache"):
        StreamingLatentDataset(f"file://{hdf5}")
    with pytest.raises(ConfigError, match="modalities"):
        StreamingLatentDataset(f"file://{local}", modalities=["rgb", "rgb"])


def test_latent_cache_dataset_refuses_a_webdataset_root_naming_the_streaming_reader(staged):
    local = staged[3]
    with pytest.raises(ConfigError, match="is a webdataset cache.*cache_dataset"):
        LatentCacheDataset(local)
