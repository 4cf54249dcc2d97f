"""Republishing an extended HDF5 cache (every shard renamed, the full old ones byte for byte the same) to a folder,
memory:// and S3 on a loopback moto server: the full old shards are copied within the store, not uploaded, and the
destination ends as the new cache exactly (`sha256sum -c` on the folder); an earlier object damaged at the
destination is uploaded, not copied; a republish stopped before any object it copies ends right when rerun."""

from __future__ import annotations

import base64
import hashlib
import uuid
from pathlib import Path

import fsspec
import pytest
from rich.filesize import decimal

from helpers.cache_versions import cache_objects, folder_objects, sha256sum_c
from helpers.moto_s3 import objects as bucket_objects
from latentforge.testing import fault_points
from latentforge.transfer import Destination, PublishOptions, TransferEvent, publish
from latentforge.transfer.digests import hash_file
from latentforge.transfer.s3 import S3Remote
from latentforge.transfer.stores import FsspecRemote, LocalDirRemote

_LAST = ("SHA256SUMS", "_CACHE_COMPLETE")


def _copies(v1: Path, v2: Path) -> dict[str, str]:
    """v2's content objects that hold the bytes of a v1 object of another name: {v2 path: v1 path}."""
    old, new = cache_objects(v1), cache_objects(v2)
    by_bytes = {data: rel for rel, data in old.items()}
    return {rel: by_bytes[data] for rel, data in new.items()
            if old.get(rel) != data and data in by_bytes and rel.rsplit("/", 1)[-1] not in _LAST}


class _Store:
    """One destination of a kind, with plain tools (paths, fsspec, boto3) to read it and damage an object."""

    def __init__(self, kind: str, tmp_path: Path, s3_prefix):
        self.kind, self._made_with = kind, (kind, tmp_path, s3_prefix)
        if kind == "folder":
            self.folder = tmp_path / f"dest-{uuid.uuid4().hex}"
            self.destination = Destination(f"file://{self.folder}")
        elif kind == "memory":
            self.base = f"republish-{uuid.uuid4().hex}/cache"
            self.destination = Destination(f"memory://{self.base}")
        else:
            self.client, options, prefix = s3_prefix
            self.bucket, self.key = prefix.split("/", 1)
            self.key += f"-{uuid.uuid4().hex}"
            self.destination = Destination(f"s3://{self.bucket}/{self.key}", options)

    def another(self) -> _Store:
        """An empty destination of the same kind."""
        return _Store(*self._made_with)

    def objects(self) -> dict[str, bytes]:
        if self.kind == "folder":
            held = folder_objects(self.folder)
            return held | ({"_SUCCESS": (self.folder / "_SUCCESS").read_bytes()}
                           if (self.folder / "_SUCCESS").exists() else {})
        if self.kind == "memory":
            fs = fsspec.filesystem("memory")
            return {path.split(f"{self.base}/", 1)[1]: fs.cat_file(path) for path in fs.find(self.base)}
        return bucket_objects(self.client, self.bucket, self.key)

    def damage(self, rel: str) -> None:
        """One byte of `rel` flipped, its size kept; on S3 with its metadata kept and a checksum of the new bytes."""
        data = bytearray(self.objects()[rel])
        data[len(data) // 2] ^= 1
        if self.kind == "folder":
            (self.folder / rel).write_bytes(bytes(data))
        elif self.kind == "memory":
            fsspec.filesystem("memory").pipe_file(f"{self.base}/{rel}", bytes(data))
        else:
            original = hashlib.sha256(self.objects()[rel]).hexdigest()
            self.client.put_object(Bucket=self.bucket, Key=f"{self.key}/{rel}", Body=bytes(data),
                                   Metadata={"sha256": original}, ChecksumAlgorithm="SHA256",
                                   ChecksumSHA256=base64.b64encode(hashlib.sha256(data).digest()).decode())


@pytest.fixture(params=["folder", "memory", "s3"])
def store(request, tmp_path):
    s3 = request.getfixturevalue("s3_prefix") if request.param == "s3" else None
    return _Store(request.param, tmp_path, s3)


@pytest.fixture
def uploads(monkeypatch) -> list[str]:
    """Every path any store is asked to upload, as publish asks."""
    sent: list[str] = []
    for store_class in (LocalDirRemote, FsspecRemote, S3Remote):
        def upload(self, rel, *args, _original=store_class.upload, **kwargs):
            sent.append(rel)
            return _original(self, rel, *args, **kwargs)

        monkeypatch.setattr(store_class, "upload", upload)
    return sent


def _wanted(v2: Path) -> dict[str, bytes]:
    return {**cache_objects(v2), "_SUCCESS": (v2 / "_SUCCESS").read_bytes()}


def test_an_extended_cache_republished_copies_its_full_old_shards(hdf5_pair, store, uploads):
    v1, v2 = hdf5_pair
    copies = _copies(v1, v2)
    assert len(copies) == 2 and all(rel.startswith("shards/") for rel in copies)  # the two full shards of v1
    publish(v1, [store.destination])
    inodes = {rel: (store.folder / rel).stat().st_ino for rel in copies.values()} if store.kind == "folder" else {}
    uploads.clear()
    events: list[TransferEvent] = []
    report = publish(v2, [store.destination], PublishOptions(workers=2, on_event=events.append)).destinations[0]

    assert report.copied == copies
    assert not set(copies) & set(uploads) and not set(copies) & set(report.uploaded)
    assert sorted(uploads) == sorted([*report.uploaded, "_SUCCESS"])
    sizes = {rel: len(data) for rel, data in cache_objects(v2).items()}
    assert report.bytes_copied == sum(sizes[rel] for rel in copies)
    assert report.bytes_uploaded == sum(sizes[rel] for rel in report.uploaded)
    assert {e.path: e.reason for e in events if e.action == "copied"} == {
        rel: f"the same bytes as {source} there, of the earlier version" for rel, source in copies.items()}
    assert store.objects() == _wanted(v2)
    if store.kind == "folder":
        sha256sum_c(store.folder)
        # hard links: the new names hold the earlier files' data, never written again
        assert {rel: (store.folder / rel).stat().st_ino for rel in copies} == {
            rel: inodes[source] for rel, source in copies.items()}

    again = publish(v2, [store.destination]).destinations[0]  # the same command: nothing left to do
    assert again.copied == {} and again.uploaded == {} and again.removed == []


def test_a_damaged_earlier_object_is_uploaded_not_copied(hdf5_pair, store, uploads):
    v1, v2 = hdf5_pair
    copies = _copies(v1, v2)
    damaged, kept = sorted(copies)
    publish(v1, [store.destination])
    store.damage(copies[damaged])
    uploads.clear()
    report = publish(v2, [store.destination]).destinations[0]

    assert report.copied == {kept: copies[kept]}
    assert damaged in uploads and kept not in uploads
    assert f"not copied from {copies[damaged]} there: " in report.uploaded[damaged]
    assert "differs" in report.uploaded[damaged]  # the read back's, or the server checksum's
    assert store.objects() == _wanted(v2)


def test_a_copy_not_confirmed_is_uploaded_over(hdf5_pair, tmp_path, monkeypatch):
    """A copy is confirmed against the new object's digest like an upload: a folder whose copies come out wrong gets
    the objects uploaded, and the destination is still the new cache exactly."""
    v1, v2 = hdf5_pair
    dest = tmp_path / "dest"
    publish(v1, [Destination(str(dest))])

    def copy_wrongly(self, source, rel, digest):
        data = bytearray((self.base / source).read_bytes())
        data[-1] ^= 1
        (self.base / rel).write_bytes(bytes(data))

    monkeypatch.setattr(LocalDirRemote, "copy", copy_wrongly)
    report = publish(v2, [Destination(str(dest))]).destinations[0]
    assert report.copied == {}
    assert all("there: the copy was not confirmed (checksum differs" in report.uploaded[rel] for rel in _copies(v1, v2))
    assert folder_objects(dest) == cache_objects(v2)
    sha256sum_c(dest)


def _stopped_at(n: int, v2: Path, store: _Store, monkeypatch) -> bool:
    """publish stopped before its n-th object (one worker: a fixed order, copies first); False when it finished."""
    monkeypatch.setenv(fault_points.FAULT_ENV, f"publish:{n}:raise")
    monkeypatch.setattr(fault_points, "_arrivals", {})
    try:
        publish(v2, [store.destination], PublishOptions(workers=1))
    except fault_points.InjectedFault:
        return True
    finally:
        monkeypatch.delenv(fault_points.FAULT_ENV)
    return False


def test_a_republish_stopped_anywhere_ends_right(hdf5_pair, store, monkeypatch):
    """Stopped before each object it copies, uploads or removes and each _SUCCESS on memory:// (the folder's every
    stop is in test_republish_kill.py); before each copy and the first upload on the folder and S3. Then the same
    command again ends in the new cache exactly."""
    v1, v2 = hdf5_pair
    old, new = cache_objects(v1), cache_objects(v2)
    copies = _copies(v1, v2)
    stops = range(1, 100) if store.kind == "memory" else range(1, len(copies) + 2)
    for n in stops:
        store = store.another()
        publish(v1, [store.destination])
        if not _stopped_at(n, v2, store, monkeypatch):
            break
        held = store.objects()
        success = held.pop("_SUCCESS", None)
        assert all(data in (old.get(rel), new.get(rel)) for rel, data in held.items())
        assert success is None or held == new  # _SUCCESS never vouches for a mix
        if n <= len(copies):
            assert sum(held.get(rel) == new[rel] for rel in copies) == n - 1  # copies come first, one by one
        if set(old) - set(new) - set(held):  # removals began: every object copied or uploaded is there
            assert all(held.get(rel) == data for rel, data in new.items() if rel.rsplit("/", 1)[-1] not in _LAST)

        report = publish(v2, [store.destination]).destinations[0]
        assert len(report.copied) == max(len(copies) - (n - 1), 0)
        assert store.objects() == _wanted(v2)
    assert store.kind != "memory" or (n > len(new) and store.objects() == _wanted(v2))  # ran past the last stop


def test_s3_copies_a_multipart_object_in_the_same_parts(s3_prefix, tmp_path):
    """An object over the part size is copied part by part (UploadPartCopy), and the copy carries the metadata and
    server checksum an upload would: it is confirmed without reading it back, unless the server keeps no checksums."""
    client, options, prefix = s3_prefix
    part = 5 << 20
    data = bytes(range(256)) * ((2 * part + 12345) // 256)
    (tmp_path / "big").write_bytes(data)
    digest = hash_file(tmp_path / "big", part)
    assert digest.multipart
    remote = S3Remote(f"s3://{prefix}", options, part, server_checksum=True)
    remote.upload("earlier.bin", tmp_path / "big", digest)
    remote.copy("earlier.bin", "new.bin", digest)
    bucket, key = prefix.split("/", 1)
    assert client.get_object(Bucket=bucket, Key=f"{key}/new.bin")["Body"].read() == data
    head = client.head_object(Bucket=bucket, Key=f"{key}/new.bin", ChecksumMode="ENABLED")
    assert head["Metadata"] == {"sha256": hashlib.sha256(data).hexdigest()}
    assert head["ChecksumSHA256"].split("-")[0] == digest.server_checksum()
    assert remote.problem("new.bin", digest, deep=False) is None
    assert not remote.reads_back(False, copied=True)
    assert S3Remote(f"s3://{prefix}", options, part, server_checksum=False).reads_back(False, copied=True)


def test_the_cli_counts_copies_apart_from_uploads(hdf5_pair, tmp_path, cli):
    v1, v2 = hdf5_pair
    copies = _copies(v1, v2)
    url = f"file://{tmp_path / 'dest'}"
    assert cli(["publish", str(v1), url]).returncode == 0
    done = cli(["publish", str(v2), url])
    assert done.returncode == 0, done.stderr
    copied_bytes = sum((v2 / rel).stat().st_size for rel in copies)
    assert f"{len(copies)} copied there from an earlier version ({decimal(copied_bytes)})" in done.stdout
    rel = sorted(copies)[0]
    assert f"copied {url}/{rel} ({decimal((v2 / rel).stat().st_size)}): the same bytes as {copies[rel]}" in done.stderr
