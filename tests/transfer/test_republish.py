"""Publishing a grown cache again to the prefix that holds its earlier version (HDF5, WebDataset, bucketed root;
a folder, memory:// and S3 on a loopback moto server): the destination ends as the new cache exactly, the earlier
version's other objects removed and counted; a file of the user's there is still refused and never deleted, and a
cache of another tokenizer still refused first. Destinations are read with plain file tools, fsspec and boto3, and
checked with `sha256sum -c`."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import fsspec
import pytest

from helpers.cache_versions import cache_objects, folder_objects, sha256sum_c
from helpers.moto_s3 import objects as bucket_objects
from latentforge.errors import CacheIntegrityError, ConfigError
from latentforge.transfer import Destination, PublishOptions, TransferEvent, publish


def _dropped(v1: Path, v2: Path) -> list[str]:
    """v1's objects that v2 does not list."""
    return sorted(set(cache_objects(v1)) - set(cache_objects(v2)))


def test_republishing_a_grown_cache_leaves_exactly_the_new_one(versions, tmp_path):
    v1, v2 = versions
    dest = tmp_path / "dest"
    publish(v1, [Destination(f"file://{dest}")])
    first = folder_objects(dest)
    events: list[TransferEvent] = []
    report = publish(v2, [Destination(f"file://{dest}")], PublishOptions(workers=2, on_event=events.append))

    (done,) = report.destinations
    dropped = _dropped(v1, v2)
    assert dropped and sorted(done.removed) == dropped  # the grown cache renamed some of v1's shards
    assert sorted(e.path for e in events if e.action == "removed") == dropped
    assert folder_objects(dest) == cache_objects(v2)
    sha256sum_c(dest)
    assert (dest / "_SUCCESS").read_bytes() == (v2 / "_SUCCESS").read_bytes()
    assert json.loads((dest / "_SUCCESS").read_bytes())["objects"] == len(cache_objects(v2))
    assert all(any(folder.iterdir()) for folder in dest.rglob("*") if folder.is_dir())  # no folder left empty
    kept = {rel for rel, data in cache_objects(v2).items() if first.get(rel) == data}
    assert kept and sorted(done.already_confirmed) == sorted(kept)  # what v1 shares with v2 is not sent again

    again = publish(v2, [Destination(f"file://{dest}")]).destinations[0]  # the same command: nothing left to do
    assert again.removed == [] and again.uploaded == {}


def test_republishing_to_s3_and_memory(hdf5_pair, s3_prefix, tmp_path):
    v1, v2 = hdf5_pair
    client, options, prefix = s3_prefix
    bucket, key = prefix.split("/", 1)
    memory = f"memory://republish-{uuid.uuid4().hex}/cache"
    destinations = [Destination(f"s3://{prefix}", options), Destination(memory)]
    publish(v1, destinations, PublishOptions(workers=2))
    assert set(_dropped(v1, v2)) <= set(bucket_objects(client, bucket, key))
    report = publish(v2, destinations, PublishOptions(workers=2))

    assert [sorted(d.removed) for d in report.destinations] == [_dropped(v1, v2)] * 2
    wanted = {**cache_objects(v2), "_SUCCESS": (v2 / "_SUCCESS").read_bytes()}
    in_s3 = bucket_objects(client, bucket, key)
    fs = fsspec.filesystem("memory")
    base = memory.removeprefix("memory://")
    in_memory = {path.removeprefix(f"/{base}/").removeprefix(f"{base}/"): fs.cat_file(path)
                 for path in fs.find(base)}
    assert in_s3 == wanted and in_memory == wanted
    copy = tmp_path / "copy"  # `sha256sum -c` there: of what S3 holds, written out as is
    for rel, data in in_s3.items():
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        (copy / rel).write_bytes(data)
    sha256sum_c(copy)


def test_the_cli_says_how_many_objects_of_the_earlier_version_went(hdf5_pair, tmp_path, cli):
    v1, v2 = hdf5_pair
    url = f"file://{tmp_path / 'dest'}"
    assert cli(["publish", str(v1), url]).returncode == 0
    done = cli(["publish", str(v2), url])
    assert done.returncode == 0, done.stderr
    dropped = _dropped(v1, v2)
    assert f"{len(dropped)} of an earlier version removed" in done.stdout
    assert f"removed {url}/{dropped[0]}" in done.stderr and "of the earlier version published there" in done.stderr


def test_files_of_the_user_are_refused_and_never_deleted(hdf5_pair, tmp_path):
    v1, v2 = hdf5_pair
    dest = tmp_path / "dest"
    publish(v1, [Destination(str(dest))])
    (dest / "notes.txt").write_text("mine")
    (dest / "shards" / "mine.h5").write_bytes(b"mine too")
    before = folder_objects(dest)
    published = (dest / "_SUCCESS").read_bytes()
    with pytest.raises(CacheIntegrityError, match=r"not part of this cache.*notes.txt, shards/mine.h5\); publish"):
        publish(v2, [Destination(str(dest))])
    assert folder_objects(dest) == before  # nothing sent, nothing removed
    assert (dest / "_SUCCESS").read_bytes() == published  # refused before any claim was withdrawn

    (dest / "notes.txt").unlink()
    (dest / "shards" / "mine.h5").unlink()
    publish(v2, [Destination(str(dest))])
    assert folder_objects(dest) == cache_objects(v2)


def test_a_folder_with_a_sha256sums_of_its_own_is_no_earlier_version(hdf5_pair, tmp_path):
    """Only a destination holding latentforge's own cache_config.json (or buckets.json) has an earlier version: a
    user's folder whose SHA256SUMS lists the user's files keeps them."""
    _, v2 = hdf5_pair
    users = tmp_path / "users"
    (users / "shards").mkdir(parents=True)
    (users / "shards" / "holiday.mp4").write_bytes(b"a video")
    (users / "SHA256SUMS").write_text(f"{'0' * 64}  shards/holiday.mp4\n")
    with pytest.raises(CacheIntegrityError, match="shards/holiday.mp4"):
        publish(v2, [Destination(str(users))])
    assert (users / "shards" / "holiday.mp4").read_bytes() == b"a video"
    assert (users / "SHA256SUMS").read_text() == f"{'0' * 64}  shards/holiday.mp4\n"


def test_a_cache_of_another_tokenizer_is_still_refused_first(versions, tmp_path):
    """Its files would be the earlier version's: the tokenizer check comes before anything is withdrawn, sent or
    removed; in a bucketed root each bucket's config is checked."""
    v1, v2 = versions
    dest = tmp_path / "dest"
    publish(v1, [Destination(str(dest))])
    config = sorted(dest.glob("**/cache_config.json"))[-1]
    edited = json.loads(config.read_text())
    edited["tokenizer"]["name"] = "another-tokenizer"
    config.write_text(json.dumps(edited))
    before = {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    with pytest.raises(ConfigError, match="holds a cache encoded by another tokenizer") as refused:
        publish(v2, [Destination(str(dest))])
    assert "tokenizer.name: 'another-tokenizer'" in str(refused.value)
    assert {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()} == before  # _SUCCESS too


def test_another_cache_of_the_same_tokenizer_replaces_the_one_there(bucketed_pair, hdf5_pair, tmp_path):
    """A bucketed root replaced by a single-shape cache: every bucket goes, markers and listings included, and
    with them their folders."""
    dest = tmp_path / "dest"
    publish(bucketed_pair[1], [Destination(str(dest))])
    report = publish(hdf5_pair[1], [Destination(str(dest))])
    assert sorted(report.destinations[0].removed) == sorted(set(cache_objects(bucketed_pair[1])) -
                                                           set(cache_objects(hdf5_pair[1])))
    assert folder_objects(dest) == cache_objects(hdf5_pair[1]) and not (dest / "buckets").exists()
    sha256sum_c(dest)
