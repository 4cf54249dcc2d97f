"""Builds over a cluster of `ray start` nodes on this machine (loopback), the driver being the CLI in its own process,
as a user runs it (and free of this process's earlier Ray sessions). The head has no CPU (it holds the driver's queue
actor); each worker node has one CPU, so one worker. Both tests build the same 8 clips and compare with one local
build of them (SHA256SUMS: tests/conftest.py's `ray_world`), on one head: each test adds its nodes and stops them
when it ends (a head starts in seconds of a loaded two-core machine's CPU).

A node that cannot see the dataset is excluded before its first unit, with a message naming it, and its units go
to the other nodes: never `unreadable` rejects. When no node passes, the build stops before any unit. The blind node
is a real `ray start` in its own mount namespace, where the dataset folder is an empty tmpfs; the driver and the
other node see it.

A build survives losing a worker node mid-run, and its cache equals a local build's. The build starts with node A
only: its worker stages a unit, then stalls inside the encode of its next one, holding that unit. Node B joins, its
worker takes the units left; then node A's raylet, agents and workers are SIGKILLed by pid. The held unit goes back
to the queue, node B's worker (or its replacement) encodes it and the build completes. All nodes share ROOT (one
filesystem). This test runs last: the GCS counts a SIGKILLed node alive for seconds more, so a test after it would
get a fresh head (the `cluster` fixture)."""

from __future__ import annotations

import json
import re
import socket
import subprocess
from pathlib import Path

import pytest

from helpers.exec_world import build_args, cli_command, cli_env, run_cli, sums
from helpers.processes import wait_for
from helpers.ray_nodes import RayNodes, add_nodes, can_hide_folders, start_head
from latentforge.staging.staged_units import completed_units

pytestmark = pytest.mark.slow

CLIPS = 8  # ray_world's clips; unit_size 2 -> 4 units
STALL = "encode:3:sleep"  # node A's worker: the first sample of its second unit (one sample per encode)


@pytest.fixture(scope="module")
def heads():
    started: list[RayNodes] = []
    yield started
    for head in started:
        head.close()


@pytest.fixture
def cluster(heads) -> RayNodes:
    """The module's head with no worker node: the nodes a test adds are stopped when it ends. A head that saw a
    node SIGKILLed is replaced (the GCS would still place work on that node until its health checks fail)."""
    if not heads or heads[-1].killed:
        heads.append(start_head())
    nodes = heads[-1]
    before = set(nodes.markers)
    yield nodes
    nodes.stop([name for name in nodes.markers if name not in before])


def _stats(root: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((root / "build").glob("stats-*.json"))]


@pytest.mark.skipif(not can_hide_folders(), reason="needs mount namespaces (unshare) to give a node its own view")
def test_node_that_cannot_see_the_dataset_is_excluded(ray_world, cluster, tmp_path):
    table, local_sums = ray_world
    nodes = cluster
    add_nodes(nodes, ["blind"], hide=table.parent)
    root = tmp_path / "cache"
    args = [a for a in build_args(table, root, "--executor", "ray", "--ray-address", nodes.address, "--procs",
                                  "2", "--workers-per-gpu", "0") if a != "--quiet"]
    alone = run_cli(args, timeout=300, RAY_AUTH_MODE="disabled")
    assert alone.returncode == 1, alone.stderr
    assert "no node of the Ray cluster passed the node check" in alone.stderr
    assert re.search(rf"{re.escape(socket.gethostname())} \(node [0-9a-f]{{12}}, [0-9.]+\): dataset check failed "
                     rf"for {re.escape(str(table.parent / 'videos'))}/clip\d+\.mp4: sample clip\d+'s source is not "
                     r"readable \(No such file or directory\); mount the dataset", alone.stderr), alone.stderr
    assert not completed_units(root / "build") and not (root / "rejects.jsonl").exists()
    [failed] = _stats(root)
    assert failed["outcome"] == "failed"
    assert [f["kind"] for f in failed["node_faults"]] == ["excluded"]

    add_nodes(nodes, ["seeing"])
    done = run_cli(args, timeout=300, RAY_AUTH_MODE="disabled")  # resumes; the blind node is excluded again
    assert done.returncode == 0, done.stderr
    assert "excluded from this build, its units go to other nodes: dataset check failed" in done.stdout
    assert sums(root) == local_sums
    assert "unreadable" not in (root / "rejects.jsonl").read_text()
    stats = _stats(root)[-1]
    assert stats["outcome"] == "complete"
    excluded = [f for f in stats["node_faults"] if f["kind"] == "excluded"]
    assert len(excluded) == 1 and "dataset check failed" in excluded[0]["detail"]
    workers = [r for r in stats["ranks"] if r["samples"]]
    assert sum(r["samples"] for r in workers) == CLIPS and len({r["node_id"] for r in workers}) == 1
    assert excluded[0]["node"] not in {r["node"] for r in workers}


def test_build_survives_a_killed_worker_node(ray_world, cluster, tmp_path):
    table, local_sums = ray_world
    nodes = cluster
    root = tmp_path / "cache"
    # every worker on node A stalls (its environment reaches them); Ray may create either rank first
    add_nodes(nodes, ["node_a"], env={"LATENTFORGE_FAULT": STALL})
    args = build_args(table, root, "--executor", "ray", "--ray-address", nodes.address, "--procs", "2",
                      "--workers-per-gpu", "0")
    with open(tmp_path / "driver.txt", "w") as log:
        driver = subprocess.Popen(cli_command(args), env=cli_env(RAY_AUTH_MODE="disabled"), stdout=log,
                                  stderr=subprocess.STDOUT)
    try:
        output = lambda: (tmp_path / "driver.txt").read_text()  # noqa: E731
        stalled = lambda: "stalls at encode" in nodes.worker_logs() or driver.poll() is not None  # noqa: E731
        assert wait_for(stalled, timeout=120) and driver.poll() is None, output()
        assert len(completed_units(root / "build")) == 1  # its first unit; it holds the second
        add_nodes(nodes, ["node_b"])
        # node B's worker takes the units left: the only unit missing is the one node A holds
        rest = lambda: len(completed_units(root / "build")) == CLIPS // 2 - 1 or driver.poll() is not None  # noqa: E731
        assert wait_for(rest, timeout=120) and driver.poll() is None, output()
        assert nodes.kill("node_a")
        assert wait_for(lambda: not nodes.pids("node_a")), f"{sorted(nodes.pids('node_a'))} outlived SIGKILL"
        assert driver.wait(timeout=180) == 0, output()
        assert sums(root) == local_sums
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
