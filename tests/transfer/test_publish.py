"""publish / fetch against a real S3-compatible server on loopback (moto's standalone server), file:// and
memory://; every check is made with boto3, sha256sum, hashlib and bash, not with our own code."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

import boto3
import h5py
import numpy as np
import pytest
from moto.server import ThreadedMotoServer

from latentforge.cache.checksums import write_sha256sums
from latentforge.cli.main import main
from latentforge.cli.publish import parse_storage_options
from latentforge.errors import CacheIntegrityError, ConfigError
from latentforge.transfer import Destination, FetchOptions, PublishOptions, TransferEvent, fetch, publish
from latentforge.transfer.fetch import staging_folder

MIB = 1 << 20
PART = 5 * MIB  # S3's smallest part, so shard 0 (7.2 MB) goes up in two parts and shard 1 (4.8 MB) in one
ROWS, ROWS_PER_SHARD = 5, 3
SHARDS = ["shards/part-00000-of-00002-000000000-000000003.h5", "shards/part-00001-of-00002-000000003-000000005.h5"]

from helpers.integrity_commands import SEED_000_FILES, SEED_000_INTEGRITY  # noqa: E402

SEED_000 = SEED_000_FILES


def seed_checks_pass(cache_root: Path) -> list[str]:
    """The seed's commands with this cache's counts; returns the ones that fail."""
    failing = []
    for command in SEED_000_INTEGRITY:
        command = command.replace("-eq 28", f"-eq {len(SHARDS)}").replace("-eq 82869", f"-eq {ROWS}")
        done = subprocess.run(["bash", "-c", command], env={**os.environ, "CACHE_ROOT": str(cache_root)})
        if done.returncode:
            failing.append(command)
    return failing


def test_seed_commands_are_quoted_verbatim():
    if not SEED_000:
        pytest.skip("shared/seeds is not beside this checkout")
    text = SEED_000[0].read_text(encoding="utf-8")
    assert all(command in text for command in SEED_000_INTEGRITY)


def make_cache(root: Path) -> None:
    """A tiny cache in the real layout, SHA256SUMS written by the sha256sum tool itself."""
    rng = np.random.default_rng(0)
    for k, rel in enumerate(SHARDS):
        rows = min(ROWS_PER_SHARD, ROWS - k * ROWS_PER_SHARD)
        (root / "shards").mkdir(parents=True, exist_ok=True)
        with h5py.File(root / rel, "w", track_order=True) as shard:
            latent = rng.standard_normal((rows, 48, 4, 60, 104)).astype(np.float16)
            shard.create_dataset("perception_latent_state", data=latent, chunks=(1, 48, 4, 60, 104), track_times=False)
            shard.create_dataset("t5_text_embeddings", data=np.zeros((rows, 16, 32), np.float16), track_times=False)
            shard.create_dataset("t5_text_length", data=np.ones(rows, np.uint16), track_times=False)
            start = k * ROWS_PER_SHARD
            shard.create_dataset("source_index", data=np.arange(start, start + rows, dtype=np.int64), track_times=False)
    with h5py.File(root / "empty_prompt.h5", "w") as empty:
        empty.create_dataset("t5_text_embeddings", data=np.zeros((1, 16, 32), np.float16), track_times=False)
    manifest = [{"dataset_index": i, "sample_id": f"clip{i}", "shard_path": SHARDS[i // ROWS_PER_SHARD],
                 "cache_row": i % ROWS_PER_SHARD} for i in range(ROWS)]
    (root / "manifest.jsonl").write_text("".join(json.dumps(row) + "\n" for row in manifest))
    (root / "rejects.jsonl").write_text("")
    (root / "cache_config.json").write_text(json.dumps({"format": "latentforge-cache", "num_samples": ROWS}))
    (root / "README.md").write_text("# tiny cache\n")
    (root / "build").mkdir()
    (root / "build" / "plan.jsonl").write_text("run records, never published\n")
    files = published_files(root)
    sums = subprocess.run(["sha256sum", *files], cwd=root, capture_output=True, text=True, check=True).stdout
    (root / "SHA256SUMS").write_text(sums)
    (root / "_CACHE_COMPLETE").write_text("built and verified\n")


@pytest.fixture(scope="module")
def cache_template(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("template") / "cache"
    make_cache(root)
    return root


@pytest.fixture
def cache_root(cache_template, tmp_path) -> Path:
    root = tmp_path / "cache"
    shutil.copytree(cache_template, root)
    return root


def published_files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                  if p.is_file() and "build" not in p.relative_to(root).parts and p.name != "_SUCCESS")


def sha256sum_c(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=root, capture_output=True, text=True)


@pytest.fixture(scope="module")
def s3_endpoint():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@dataclass
class S3:
    bucket: str
    client: object
    options: dict

    def exists(self, key: str) -> bool:
        return "Contents" in self.client.list_objects_v2(Bucket=self.bucket, Prefix=key)

    def keys(self, prefix: str) -> list[str]:
        found = self.client.list_objects_v2(Bucket=self.bucket, Prefix=prefix).get("Contents", [])
        return sorted(item["Key"][len(prefix):] for item in found)


_BUCKETS = iter(range(10_000))


@pytest.fixture
def s3(s3_endpoint) -> S3:
    client = boto3.client("s3", endpoint_url=s3_endpoint, aws_access_key_id="testing",
                          aws_secret_access_key="testing", region_name="us-east-1")
    bucket = f"lf-test-{next(_BUCKETS)}"
    client.create_bucket(Bucket=bucket)
    options = {"key": "testing", "secret": "testing", "endpoint_url": s3_endpoint,
               "client_kwargs": {"region_name": "us-east-1"}}
    return S3(bucket, client, options)


def expected_server_checksum(data: bytes) -> str:
    """What S3 reports: SHA-256 of the bytes, or for a multipart object SHA-256 of the parts' SHA-256s."""
    if len(data) <= PART:
        return base64.b64encode(hashlib.sha256(data).digest()).decode()
    parts = b"".join(hashlib.sha256(data[i:i + PART]).digest() for i in range(0, len(data), PART))
    return base64.b64encode(hashlib.sha256(parts).digest()).decode()


def corrupt_in_s3(s3: S3, key: str, original: bytes) -> None:
    """Same size, one byte flipped, metadata still claiming the original hash (a writer other than publish)."""
    damaged = bytearray(original)
    damaged[len(damaged) // 2] ^= 0xFF
    head = s3.client.head_object(Bucket=s3.bucket, Key=key)
    s3.client.put_object(Bucket=s3.bucket, Key=key, Body=bytes(damaged), Metadata=head["Metadata"])


def test_publish_to_s3_and_file_writes_success_last(cache_root, s3, tmp_path):
    dest_dir = tmp_path / "dest"
    s3.client.put_object(Bucket=s3.bucket, Key="caches/v1/_SUCCESS", Body=b"stale claim from an older publish")
    (cache_root / "_SUCCESS").write_text("stale")
    events: list[TransferEvent] = []
    lock = threading.Lock()

    def watch(event: TransferEvent) -> None:
        # At the moment of every upload and confirmation, no _SUCCESS may exist anywhere.
        assert not s3.exists("caches/v1/_SUCCESS")
        assert not (dest_dir / "_SUCCESS").exists() and not (cache_root / "_SUCCESS").exists()
        with lock:
            events.append(event)

    dests = [Destination(f"s3://{s3.bucket}/caches/v1", s3.options), Destination(f"file://{dest_dir}")]
    report = publish(cache_root, dests, PublishOptions(workers=3, part_size=PART, on_event=watch))

    files = published_files(cache_root)
    assert "build/plan.jsonl" not in files and len(files) == 9
    for action in ("uploaded", "confirmed"):
        assert sorted(e.path for e in events if e.action == action) == sorted(files * 2)
    reference = dict(line.split("  ")[::-1] for line in (cache_root / "SHA256SUMS").read_text().splitlines())
    assert s3.keys("caches/v1/") == sorted(files + ["_SUCCESS"])
    for rel in files:
        data = (cache_root / rel).read_bytes()
        head = s3.client.head_object(Bucket=s3.bucket, Key=f"caches/v1/{rel}", ChecksumMode="ENABLED")
        assert head["ContentLength"] == len(data)
        assert head["Metadata"]["sha256"] == reference.get(rel, hashlib.sha256(data).hexdigest())
        assert head["ChecksumSHA256"].split("-")[0] == expected_server_checksum(data)
    assert len((cache_root / SHARDS[0]).read_bytes()) > PART  # the multipart path really ran
    body = s3.client.get_object(Bucket=s3.bucket, Key=f"caches/v1/{SHARDS[0]}")["Body"].read()
    assert body == (cache_root / SHARDS[0]).read_bytes()
    assert not s3.client.list_multipart_uploads(Bucket=s3.bucket).get("Uploads")

    marker = s3.client.get_object(Bucket=s3.bucket, Key="caches/v1/_SUCCESS")["Body"].read()
    assert marker == (dest_dir / "_SUCCESS").read_bytes() == (cache_root / "_SUCCESS").read_bytes()
    assert json.loads(marker)["objects"] == len(files)
    assert sha256sum_c(dest_dir).returncode == 0
    assert seed_checks_pass(dest_dir) == [] and seed_checks_pass(cache_root) == []
    assert not (dest_dir / "build").exists()
    assert [d.bytes_uploaded for d in report.destinations] == [sum((cache_root / f).stat().st_size for f in files)] * 2


class Interrupted(Exception):
    pass


def test_interrupted_publish_resumes_with_only_the_rest(cache_root, s3):
    url = f"s3://{s3.bucket}/c"
    uploaded_first: list[str] = []

    def die_after_three(event: TransferEvent) -> None:
        if event.action == "uploaded":
            uploaded_first.append(event.path)
            if len(uploaded_first) == 3:
                raise Interrupted

    with pytest.raises(Interrupted):
        publish(cache_root, [Destination(url, s3.options)],
                PublishOptions(workers=2, part_size=PART, on_event=die_after_three))
    present = s3.keys("c/")
    files = published_files(cache_root)
    assert 3 <= len(present) < len(files) and "_SUCCESS" not in present
    assert not (cache_root / "_SUCCESS").exists()
    assert "_CACHE_COMPLETE" not in present  # markers go last

    second: list[str] = []
    report = publish(cache_root, [Destination(url, s3.options)], PublishOptions(
        workers=2, part_size=PART, on_event=lambda e: second.append(e.path) if e.action == "uploaded" else None))
    assert sorted(second) == sorted(set(files) - set(present))
    assert report.destinations[0].already_confirmed == present
    assert s3.exists("c/_SUCCESS") and (cache_root / "_SUCCESS").exists()


def test_corrupt_remote_object_is_caught_by_fetch_and_replaced_by_publish(cache_root, s3, tmp_path):
    url = f"s3://{s3.bucket}/c"
    options = PublishOptions(workers=2, part_size=PART)
    publish(cache_root, [Destination(url, s3.options)], options)
    corrupt_in_s3(s3, f"c/{SHARDS[0]}", (cache_root / SHARDS[0]).read_bytes())

    fetched = tmp_path / "fetched"
    with pytest.raises(CacheIntegrityError, match=SHARDS[0]):
        fetch(Destination(url, s3.options), fetched)
    assert not fetched.exists()  # everything was checked in the staging folder; nothing reached the root
    assert not (staging_folder(fetched) / SHARDS[0]).exists()  # the bad copy is dropped, the good ones kept

    report = publish(cache_root, [Destination(url, s3.options)], options)
    assert list(report.destinations[0].uploaded) == [SHARDS[0]]
    assert "no SHA-256 checksum" in report.destinations[0].uploaded[SHARDS[0]]

    again = fetch(Destination(url, s3.options), fetched, FetchOptions(workers=2))
    assert again.downloaded == [SHARDS[0]] and len(again.already_present) == len(published_files(cache_root)) - 3
    assert sha256sum_c(fetched).returncode == 0
    assert seed_checks_pass(fetched) == []


def test_a_refused_fetch_leaves_a_good_local_copy_whole(cache_root, s3, tmp_path):
    url = f"s3://{s3.bucket}/c"
    publish(cache_root, [Destination(url, s3.options)], PublishOptions(workers=2, part_size=PART))
    local = tmp_path / "local"
    fetch(Destination(url, s3.options), local)
    before = {p.relative_to(local): p.read_bytes() for p in local.rglob("*") if p.is_file()}
    assert {Path("_SUCCESS"), Path("_CACHE_COMPLETE")} <= set(before)
    s3.client.put_object(Bucket=s3.bucket, Key="c/_SUCCESS", Body=b'{"sha256sums_sha256": "' + b"0" * 64 + b'"}')
    with pytest.raises(CacheIntegrityError, match="but _SUCCESS vouches for 0000"):
        fetch(Destination(url, s3.options), local)  # a tampered remote marker: refused before anything local
    revised = tmp_path / "revised"  # a new version of the cache is published; one of its new objects is damaged
    shutil.copytree(cache_root, revised)
    (revised / "README.md").write_text((revised / "README.md").read_text() + "\nRevised.\n")
    write_sha256sums(revised)
    publish(revised, [Destination(url, s3.options)], PublishOptions(workers=2, part_size=PART))
    corrupt_in_s3(s3, "c/README.md", (revised / "README.md").read_bytes())
    with pytest.raises(CacheIntegrityError, match="README.md: sha256 .* differs"):
        fetch(Destination(url, s3.options), local)  # refused after the download, in the staging folder
    assert {p.relative_to(local): p.read_bytes() for p in local.rglob("*") if p.is_file()} == before
    assert sha256sum_c(local).returncode == 0


def test_fetch_refuses_a_shard_and_sha256sums_replaced_together_after_publish(cache_root, s3, tmp_path):
    url = f"s3://{s3.bucket}/c"
    publish(cache_root, [Destination(url, s3.options)], PublishOptions(workers=2, part_size=PART))
    forged = tmp_path / "forged"
    shutil.copytree(cache_root, forged)
    data = bytearray((forged / SHARDS[1]).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (forged / SHARDS[1]).write_bytes(bytes(data))
    listed = [line.split("  ", 1)[1] for line in (forged / "SHA256SUMS").read_text().splitlines()]
    sums = subprocess.run(["sha256sum", *listed], cwd=forged, capture_output=True, text=True,
                          check=True).stdout
    (forged / "SHA256SUMS").write_text(sums)
    assert sha256sum_c(forged).returncode == 0  # the pair agrees with itself: only _SUCCESS can tell
    for rel in (SHARDS[1], "SHA256SUMS"):
        s3.client.put_object(Bucket=s3.bucket, Key=f"c/{rel}", Body=(forged / rel).read_bytes())

    fetched = tmp_path / "fetched"
    with pytest.raises(CacheIntegrityError, match="SHA256SUMS has sha256 .* but _SUCCESS vouches for"):
        fetch(Destination(url, s3.options), fetched)
    assert not (fetched / "_SUCCESS").exists() and not (fetched / "_CACHE_COMPLETE").exists()
    assert not (fetched / SHARDS[1]).exists()  # refused before a single shard came down

    s3.client.put_object(Bucket=s3.bucket, Key="c/_SUCCESS", Body=b"published\n")
    with pytest.raises(CacheIntegrityError, match="records no sha256sums_sha256"):
        fetch(Destination(url, s3.options), fetched)
    with pytest.raises(CacheIntegrityError, match="records no sha256sums_sha256"):  # present, so never ignored
        fetch(Destination(url, s3.options), fetched, FetchOptions(require_success=False))
    s3.client.delete_object(Bucket=s3.bucket, Key="c/_SUCCESS")
    fetch(Destination(url, s3.options), fetched, FetchOptions(require_success=False))  # trusts SHA256SUMS as is
    assert sha256sum_c(fetched).returncode == 0 and not (fetched / "_SUCCESS").exists()


def test_verify_remote_reads_back_what_metadata_cannot_vouch_for(cache_root, s3):
    url = f"s3://{s3.bucket}/c"
    cheap = PublishOptions(workers=2, part_size=PART, server_checksum=False)
    publish(cache_root, [Destination(url, s3.options)], cheap)
    corrupt_in_s3(s3, f"c/{SHARDS[1]}", (cache_root / SHARDS[1]).read_bytes())

    # Without server checksums, size and a forged x-amz-meta-sha256 look right: only reading back tells.
    assert publish(cache_root, [Destination(url, s3.options)], cheap).destinations[0].uploaded == {}
    deep = PublishOptions(workers=2, part_size=PART, server_checksum=False, verify_remote=True)
    report = publish(cache_root, [Destination(url, s3.options)], deep)
    assert list(report.destinations[0].uploaded) == [SHARDS[1]]
    assert "content sha256" in report.destinations[0].uploaded[SHARDS[1]]
    body = s3.client.get_object(Bucket=s3.bucket, Key=f"c/{SHARDS[1]}")["Body"].read()
    assert body == (cache_root / SHARDS[1]).read_bytes()


def test_publish_refuses_unbuilt_or_damaged_roots(cache_root, tmp_path):
    dest = tmp_path / "dest"
    (cache_root / "_CACHE_COMPLETE").unlink()
    with pytest.raises(CacheIntegrityError, match="_CACHE_COMPLETE"):
        publish(cache_root, [Destination(f"file://{dest}")])
    (cache_root / "_CACHE_COMPLETE").write_text("built\n")

    with open(cache_root / SHARDS[1], "r+b") as handle:
        handle.seek(4096)
        byte = handle.read(1)
        handle.seek(4096)
        handle.write(bytes([byte[0] ^ 1]))
    assert sha256sum_c(cache_root).returncode != 0
    with pytest.raises(CacheIntegrityError, match=SHARDS[1]):
        publish(cache_root, [Destination(f"file://{dest}")])
    assert not dest.exists()

    with pytest.raises(ConfigError, match="overlaps"):
        publish(cache_root, [Destination(f"file://{cache_root / 'copy'}")])


def test_publish_refuses_stray_local_files_and_foreign_remote_files(cache_root, tmp_path):
    (cache_root / "notes.txt").write_text("not in SHA256SUMS")
    with pytest.raises(CacheIntegrityError, match="notes.txt: present but not listed"):
        publish(cache_root, [Destination(f"file://{tmp_path / 'dest'}")])
    (cache_root / "notes.txt").unlink()

    dest = tmp_path / "other"
    (dest / "shards").mkdir(parents=True)
    (dest / "shards" / "part-00099-of-00100-000000000-000000003.h5").write_bytes(b"an older cache")
    with pytest.raises(CacheIntegrityError, match="not part of this cache"):
        publish(cache_root, [Destination(f"file://{dest}")])
    assert sorted(p.name for p in dest.rglob("*") if p.is_file()) == ["part-00099-of-00100-000000000-000000003.h5"]


def test_file_destination_rerun_replaces_a_damaged_copy_and_discards_partials(cache_root, tmp_path):
    dest = tmp_path / "dest"
    publish(cache_root, [Destination(str(dest))])
    data = bytearray((dest / "manifest.jsonl").read_bytes())
    data[0] ^= 1
    (dest / "manifest.jsonl").write_bytes(bytes(data))
    (dest / "shards" / ".part-00000-of-00002-000000000-000000003.h5.tmp4242").write_bytes(b"half a copy")
    report = publish(cache_root, [Destination(f"file://{dest}")])
    assert list(report.destinations[0].uploaded) == ["manifest.jsonl"]
    assert sha256sum_c(dest).returncode == 0 and seed_checks_pass(dest) == []
    assert sorted(p.name for p in (dest / "shards").iterdir()) == [Path(s).name for s in SHARDS]


def test_generic_fsspec_store_round_trip(cache_root, tmp_path):
    url = "memory://latentforge-test/cache"
    publish(cache_root, [Destination(url)], PublishOptions(workers=2))
    fetched = tmp_path / "fetched"
    report = fetch(Destination(url), fetched)
    assert sorted(report.downloaded) == sorted(set(published_files(cache_root)) - {"SHA256SUMS", "_CACHE_COMPLETE"})
    assert sha256sum_c(fetched).returncode == 0 and seed_checks_pass(fetched) == []


def test_fetch_refuses_an_unfinished_publish(cache_root, tmp_path):
    source = tmp_path / "half"
    shutil.copytree(cache_root, source, ignore=shutil.ignore_patterns("build"))
    with pytest.raises(CacheIntegrityError, match="no _SUCCESS"):
        fetch(Destination(f"file://{source}"), tmp_path / "out")
    report = fetch(Destination(f"file://{source}"), tmp_path / "out", FetchOptions(require_success=False))
    assert report.downloaded and (tmp_path / "out" / "_CACHE_COMPLETE").exists()
    assert not (tmp_path / "out" / "_SUCCESS").exists()


def test_cli_publish_to_s3_and_fetch_back(cache_root, s3, s3_endpoint, tmp_path, capsys):
    options = ["-o", f"endpoint_url={s3_endpoint}", "-o", "key=testing", "-o", "secret=testing",
               "-o", "client_kwargs={region_name: us-east-1}"]
    url = f"s3://{s3.bucket}/cli"
    assert main(["publish", str(cache_root), url, "--part-size-mib", "5", "--workers", "2", *options]) == 0
    assert "_SUCCESS written at 1 destination" in capsys.readouterr().out
    out = tmp_path / "out"
    assert main(["fetch", url, str(out), *options]) == 0
    assert sha256sum_c(out).returncode == 0 and (out / "_SUCCESS").exists()
    assert main(["publish", str(cache_root), url, "--part-size-mib", "1", *options]) == 2  # ConfigError
    assert main(["fetch", f"file://{tmp_path / 'nothing'}", str(tmp_path / 'o2')]) == 1


def test_storage_options_parse_as_yaml_values():
    assert parse_storage_options(["endpoint_url=http://127.0.0.1:9000", "anon=true", "client_kwargs={a: 1}"]) == {
        "endpoint_url": "http://127.0.0.1:9000", "anon": True, "client_kwargs": {"a": 1}}
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_storage_options(["endpoint_url"])
