"""The checks a Ray worker runs on its node before its first unit (executor/ray/node_check.py), run here on real
files against the facts a driver collected: each failure names the check, the path, the value and the fix.
The same checks on a real Ray node: tests/executor/test_ray_nodes.py."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import socket

import pytest

from helpers.exec_world import make_table
from latentforge.config.loading import load_config
from latentforge.executor.lock_record import LockRecord
from latentforge.executor.ray.node_check import NodeCheckFailed, check_node, node_facts
from latentforge.pipeline.plan import make_plan
from latentforge.pipeline.unit_inputs import cut_units
from latentforge.readers.table import TableReader


@pytest.fixture
def world(tmp_path):
    table = make_table(tmp_path / "world", count=6)
    checkpoint = tmp_path / "vae.pth"
    checkpoint.write_bytes(b"weights" * 100)
    root = tmp_path / "cache"
    config = load_config(None, [
        "dataset.reader=table", f"dataset.path={table}", "dataset.id_column=id", f"output.root={root}",
        "tokenizer.name=wan2.1", f"tokenizer.checkpoint={checkpoint}", "text.name=none"])
    build_dir = root / "build"
    build_dir.mkdir(parents=True)
    lock = LockRecord(1, socket.gethostname(), "token")
    (build_dir / "lock").write_text(lock.to_text())
    digest = hashlib.sha256(checkpoint.read_bytes()).hexdigest()
    (build_dir / "run.json").write_text(json.dumps({"key": {"tokenizer_sha256": digest}}))
    samples, _ = make_plan(list(TableReader(config.dataset).entries()), None, None)
    units = cut_units(samples, {s.source_index: object() for s in samples}, 2)
    return config, build_dir, node_facts(config, build_dir, units, lock.token), checkpoint


def test_a_node_that_sees_what_the_driver_saw_passes(world):
    config, build_dir, facts, _ = world
    assert [f.sample_id for f in facts.sources] == ["clip000", "clip002", "clip004"]  # first, middle, last unit
    check_node(config, build_dir, facts)
    assert not list((build_dir / "staging").iterdir())  # the write probe leaves nothing


def test_missing_or_different_source_fails_the_dataset_check(world):
    config, build_dir, facts, _ = world
    middle = facts.sources[1].path
    with open(middle, "ab") as handle:
        handle.write(b"x")
    with pytest.raises(NodeCheckFailed, match=rf"dataset check failed for {middle}: sample clip002's source has "
                                              rf"\d+ bytes, the driver sees \d+; give every node the same copy"):
        check_node(config, build_dir, facts)
    (build_dir.parent.parent / "world" / "videos" / "clip004.mp4").unlink()
    gone = dataclasses.replace(facts, sources=facts.sources[2:])
    with pytest.raises(NodeCheckFailed, match=r"clip004's source is not readable \(No such file"):
        check_node(config, build_dir, gone)


def test_another_checkpoint_fails_the_models_check(world):
    config, build_dir, facts, checkpoint = world
    checkpoint.write_bytes(b"other weights")
    recorded = facts.tokenizer_sha256
    with pytest.raises(NodeCheckFailed, match=rf"models check failed for {checkpoint}: the tokenizer checkpoint "
                                              rf"has SHA-256 [0-9a-f]{{64}}, the build recorded {recorded}"):
        check_node(config, build_dir, facts)


def test_another_lock_or_a_read_only_root_fails_the_output_check(world):
    config, build_dir, facts, _ = world
    with pytest.raises(NodeCheckFailed, match="output root check failed for .*lock: this build's lock is held by "
                                              "pid 1 on .*; the output root must be one filesystem"):
        check_node(config, build_dir, dataclasses.replace(facts, lock_token="another build's token"))
    (build_dir / "staging").mkdir()
    (build_dir / "staging" / f".node-check.tmp{os.getpid()}").mkdir()  # the probe cannot be a file
    with pytest.raises(NodeCheckFailed, match="output root check failed for .*staging: not writable"):
        check_node(config, build_dir, facts)


def test_another_version_fails_the_software_check(world):
    config, build_dir, facts, _ = world
    with pytest.raises(NodeCheckFailed, match="software check failed for latentforge: this node runs latentforge "
                                              ".*, the driver 0.0.1; install the same version"):
        check_node(config, build_dir, dataclasses.replace(facts, version="0.0.1"))
