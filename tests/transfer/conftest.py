"""Two versions of one cache per format (helpers.cache_versions), built once per test run; tests publish them, which
changes nothing in them but their _SUCCESS."""

from __future__ import annotations

import itertools

import pytest

from helpers.cache_versions import bucketed_versions, hdf5_versions, webdataset_versions
from helpers.moto_s3 import moto_s3

REPUBLISH_BUCKET = "lf-republish"
_PREFIXES = itertools.count()


@pytest.fixture(scope="session")
def hdf5_pair(tmp_path_factory):
    return hdf5_versions(tmp_path_factory.mktemp("versions-hdf5"))


@pytest.fixture(scope="session")
def webdataset_pair(tmp_path_factory):
    return webdataset_versions(tmp_path_factory.mktemp("versions-wds"))


@pytest.fixture(scope="session")
def bucketed_pair(bucket_inputs, tmp_path_factory):
    return bucketed_versions(*bucket_inputs, tmp_path_factory.mktemp("versions-buckets"))


@pytest.fixture(params=["hdf5", "webdataset", "bucketed"])
def versions(request):
    """(v1, v2) of each format in turn."""
    return request.getfixturevalue(f"{request.param}_pair")


@pytest.fixture(scope="session")
def _republish_s3():
    with moto_s3(REPUBLISH_BUCKET) as (client, env):
        yield client, {"key": "testing", "secret": "testing", "endpoint_url": env["AWS_ENDPOINT_URL"],
                       "client_kwargs": {"region_name": "us-east-1"}}


@pytest.fixture
def s3_prefix(_republish_s3):
    """(boto3 client, storage options, "BUCKET/PREFIX") of a prefix of its own on a moto server on loopback."""
    client, options = _republish_s3
    return client, options, f"{REPUBLISH_BUCKET}/cache-{next(_PREFIXES)}"
