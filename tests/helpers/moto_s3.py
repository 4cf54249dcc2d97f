"""The moto S3 server on loopback for tests that need a real object store: a bucket, the environment a
`latentforge` process (or s3fs here) needs to reach it, and a boto3 client to look at the objects directly."""

from __future__ import annotations

import contextlib
from typing import Iterator

import boto3
from moto.server import ThreadedMotoServer


@contextlib.contextmanager
def moto_s3(*buckets: str) -> Iterator[tuple[object, dict[str, str]]]:
    """(boto3 client, environment variables) while a moto server with `buckets` runs on 127.0.0.1."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        env = {"AWS_ENDPOINT_URL": f"http://{host}:{port}", "AWS_ACCESS_KEY_ID": "testing",
               "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
        client = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], aws_access_key_id="testing",
                              aws_secret_access_key="testing", region_name="us-east-1")
        for bucket in buckets:
            client.create_bucket(Bucket=bucket)
        yield client, env
    finally:
        server.stop()


def objects(client, bucket: str, prefix: str) -> dict[str, bytes]:
    """{key below prefix/: bytes} of every object under `prefix`."""
    listed = client.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/").get("Contents", [])
    return {o["Key"].removeprefix(f"{prefix}/"): client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
            for o in listed}
