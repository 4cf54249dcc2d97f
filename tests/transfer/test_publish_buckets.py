"""publish / fetch of a bucketed root through a real S3-compatible server on loopback (moto's standalone server):
fetch brings back every bucket, `sha256sum -c` passes at the root and in each bucket, every marker is in place;
an object or the marker of one bucket missing at the source is caught and no marker is written. Objects are
inspected and removed with boto3."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer

from latentforge.dataset import BucketedLatentDataset
from latentforge.errors import CacheIntegrityError
from latentforge.transfer import Destination, FetchOptions, PublishOptions, fetch, publish
from latentforge.verification.entry import verify

BUCKET = "lf-buckets"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                          region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    yield client, {"key": "testing", "secret": "testing", "endpoint_url": endpoint,
                   "client_kwargs": {"region_name": "us-east-1"}}
    server.stop()


@pytest.fixture(scope="module")
def published(bucketed_cache, s3, tmp_path_factory) -> tuple[Path, Destination]:
    root = tmp_path_factory.mktemp("publish-buckets") / "cache"
    shutil.copytree(bucketed_cache, root)  # publish writes the local _SUCCESS
    source = Destination(f"s3://{BUCKET}/wan", s3[1])
    publish(root, [source], PublishOptions(workers=2))
    return root, source


def _sha256sum_c(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=folder, capture_output=True, text=True)


def _bucket_paths(root: Path) -> list[str]:
    return [e["path"] for e in json.loads((root / "buckets.json").read_text())["buckets"] if e["path"]]


def test_fetch_brings_back_every_bucket_with_its_markers(published, s3, tmp_path):
    root, source = published
    keys = {item["Key"] for item in s3[0].list_objects_v2(Bucket=BUCKET, Prefix="wan/")["Contents"]}
    assert "wan/_SUCCESS" in keys and "wan/buckets.json" in keys and not any("/build/" in k for k in keys)
    fetched = tmp_path / "fetched"
    fetch(source, fetched, FetchOptions(workers=2))
    assert _sha256sum_c(fetched).returncode == 0
    assert len(_bucket_paths(fetched)) == 4
    for path in _bucket_paths(fetched):
        assert _sha256sum_c(fetched / path).returncode == 0, path
        assert (fetched / path / "_CACHE_COMPLETE").is_file(), path
    assert (fetched / "_CACHE_COMPLETE").is_file() and (fetched / "_SUCCESS").is_file()
    report = verify(fetched)
    assert report.ok, report.failures
    assert BucketedLatentDataset(fetched).bucket_sizes == BucketedLatentDataset(root).bucket_sizes


def test_an_object_missing_in_one_bucket_is_caught(published, s3, tmp_path):
    root, source = published
    listed = (root / "SHA256SUMS").read_text().split()[1::2]
    shard = next(rel for rel in listed if rel.startswith("buckets/17x48x48/shards/"))
    body = s3[0].get_object(Bucket=BUCKET, Key=f"wan/{shard}")["Body"].read()
    s3[0].delete_object(Bucket=BUCKET, Key=f"wan/{shard}")
    try:
        fetched = tmp_path / "fetched"
        with pytest.raises(CacheIntegrityError, match=f"{shard}: listed in SHA256SUMS but missing"):
            fetch(source, fetched, FetchOptions(workers=2))
        assert not (fetched / "_CACHE_COMPLETE").exists() and not (fetched / "_SUCCESS").exists()
        assert not (fetched / "buckets" / "17x48x48" / "_CACHE_COMPLETE").exists()
    finally:
        s3[0].put_object(Bucket=BUCKET, Key=f"wan/{shard}", Body=body)


def test_a_bucket_marker_missing_at_the_source_is_caught(published, s3, tmp_path):
    _, source = published
    key = "wan/buckets/17x32x64/_CACHE_COMPLETE"
    body = s3[0].get_object(Bucket=BUCKET, Key=key)["Body"].read()
    s3[0].delete_object(Bucket=BUCKET, Key=key)
    try:
        fetched = tmp_path / "fetched"
        with pytest.raises(CacheIntegrityError, match="buckets/17x32x64/_CACHE_COMPLETE: missing at"):
            fetch(source, fetched, FetchOptions(workers=2))
        assert not (fetched / "_CACHE_COMPLETE").exists() and not (fetched / "_SUCCESS").exists()
    finally:
        s3[0].put_object(Bucket=BUCKET, Key=key, Body=body)
