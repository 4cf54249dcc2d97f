"""A republish stopped before any object it sends or removes (LATENTFORGE_FAULT=publish:N, every N in turn), then
run again with the same command, ends in the destination of an uninterrupted one. In between the destination holds
only objects of the two versions, removes nothing of the earlier version before the new content is all there, keeps
the earlier SHA256SUMS until the earlier version's other objects are gone, and has no _SUCCESS unless it holds the
new cache exactly. One stop is a real SIGKILL of a process of its own."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.cache_versions import cache_objects, folder_objects, sha256sum_c
from helpers.exec_world import cli_env
from helpers.moto_s3 import objects as bucket_objects
from latentforge.testing import fault_points
from latentforge.transfer import Destination, PublishOptions, publish
from latentforge.transfer.pool import run_parallel

_LAST = ("SHA256SUMS", "_CACHE_COMPLETE")  # listings and markers: sent after the earlier version's objects went


def test_nothing_queued_starts_once_an_object_failed():
    """What lets an exception stand in for a kill: the worker whose object failed takes no other one."""
    for _ in range(10):
        started: list[int] = []

        def send(item: int) -> None:
            started.append(item)
            if item == 0:
                time.sleep(0.002)  # every object queued by now, as when a real upload fails
                raise fault_points.InjectedFault("stopped")

        with pytest.raises(fault_points.InjectedFault):
            run_parallel(send, list(range(5)), workers=1)
        assert started == [0]


def _stopped_at(n: int, root: Path, dest: Path, monkeypatch) -> bool:
    """publish stopped before its n-th object (one worker: a fixed order); False when it has fewer and finished."""
    monkeypatch.setenv(fault_points.FAULT_ENV, f"publish:{n}:raise")
    monkeypatch.setattr(fault_points, "_arrivals", {})
    try:
        publish(root, [Destination(str(dest))], PublishOptions(workers=1))
    except fault_points.InjectedFault:
        return True
    finally:
        monkeypatch.delenv(fault_points.FAULT_ENV)
    return False


def _check_between(held: dict[str, bytes], dest: Path, v1: dict[str, bytes], v2: dict[str, bytes]) -> str:
    """The invariants of a stopped republish; which stage it stopped in."""
    dropped = set(v1) - set(v2)
    assert all(held[rel] in (v1.get(rel), v2.get(rel)) for rel in held)  # the two versions' objects only
    if (dest / "_SUCCESS").exists():
        assert held == v2  # _SUCCESS never vouches for a mix
    if "_CACHE_COMPLETE" in held:  # nor does the root's marker: withdrawn before the first object changed
        assert held in (v1, v2)
    if dropped - set(held):  # removals began: every new content object is there
        assert all(held.get(rel) == data for rel, data in v2.items() if rel.rsplit("/", 1)[-1] not in _LAST)
    if held["SHA256SUMS"] == v2["SHA256SUMS"]:  # the new listing only once the earlier objects are gone
        assert not dropped & set(held)
    if dropped <= set(held):
        return "before removals"
    return "amid removals" if dropped & set(held) else "after removals"


def test_a_republish_stopped_anywhere_ends_as_an_uninterrupted_one(versions, tmp_path, monkeypatch):
    v1, v2 = versions
    published = tmp_path / "v1-published"
    publish(v1, [Destination(str(published))])
    old, new = cache_objects(v1), cache_objects(v2)
    stages = []
    n = 0
    while True:
        n += 1
        dest = tmp_path / f"stopped-{n}"
        shutil.copytree(published, dest)
        if not _stopped_at(n, v2, dest, monkeypatch):
            break
        stages.append(_check_between(folder_objects(dest), dest, old, new))
        publish(v2, [Destination(str(dest))])  # the same command again
        assert folder_objects(dest) == new, n
        assert (dest / "_SUCCESS").read_bytes() == (v2 / "_SUCCESS").read_bytes()
        sha256sum_c(dest)
        shutil.rmtree(dest)
    assert folder_objects(dest) == new and (dest / "_SUCCESS").exists()  # the run past the last stop finished
    assert {"before removals", "after removals"} <= set(stages)
    assert "amid removals" in stages or len(set(old) - set(new)) < 2
    assert n > len(set(new) - set(old)) + 2  # each new object, each removal, each _SUCCESS was a stop


def test_a_republish_killed_amid_its_removals_in_a_process_of_its_own(hdf5_pair, tmp_path):
    v1, v2 = hdf5_pair
    dest = tmp_path / "dest"
    publish(v1, [Destination(str(dest))])
    old, new = cache_objects(v1), cache_objects(v2)
    changed = sum(old.get(rel) != data for rel, data in new.items() if rel.rsplit("/", 1)[-1] not in _LAST)
    code = f"from latentforge.transfer import *; publish({str(v2)!r}, [Destination({str(dest)!r})], " \
           "PublishOptions(workers=1))"
    env = cli_env(**{fault_points.FAULT_ENV: f"publish:{changed + 2}"})  # past the first removal, before the second
    killed = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert killed.returncode == -9, killed.stderr
    held = set(folder_objects(dest))
    dropped = set(old) - set(new)
    assert 0 < len(dropped - held) < len(dropped)
    assert "_CACHE_COMPLETE" not in held  # withdrawn before the first object changed
    assert not (dest / "_SUCCESS").exists() and not (v2 / "_SUCCESS").exists()

    report = publish(v2, [Destination(str(dest))])
    assert len(report.destinations[0].removed) == len(set(old) - set(new)) - 1  # the rest of them
    assert folder_objects(dest) == new and (dest / "_SUCCESS").exists()
    sha256sum_c(dest)


@pytest.mark.parametrize("stage", ["first removal", "root SHA256SUMS"])
def test_a_republish_to_s3_stopped_mid_way_finishes(hdf5_pair, s3_prefix, stage, monkeypatch):
    """On S3 too: stopped before its first removal, or after them but before the new root SHA256SUMS."""
    v1, v2 = hdf5_pair
    client, options, prefix = s3_prefix
    url = f"s3://{prefix}"
    publish(v1, [Destination(url, options)])
    old, new = cache_objects(v1), cache_objects(v2)
    changed = sum(old.get(rel) != data for rel, data in new.items() if rel.rsplit("/", 1)[-1] not in _LAST)
    n = changed + 1 if stage == "first removal" else changed + len(set(old) - set(new)) + 1
    monkeypatch.setenv(fault_points.FAULT_ENV, f"publish:{n}:raise")
    monkeypatch.setattr(fault_points, "_arrivals", {})
    with pytest.raises(fault_points.InjectedFault):
        publish(v2, [Destination(url, options)], PublishOptions(workers=1))
    monkeypatch.delenv(fault_points.FAULT_ENV)
    bucket, key = prefix.split("/", 1)
    held = bucket_objects(client, bucket, key)
    assert "_SUCCESS" not in held and held["SHA256SUMS"] == old["SHA256SUMS"]
    assert (set(old) - set(new) <= set(held)) == (stage == "first removal")
    publish(v2, [Destination(url, options)])
    assert bucket_objects(client, bucket, key) == {**new, "_SUCCESS": (v2 / "_SUCCESS").read_bytes()}
