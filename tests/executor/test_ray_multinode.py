"""A build over a three-node Ray cluster on this machine (a head and two worker nodes, each its own `ray start`)
survives losing a worker node mid-run, and its cache equals a local build's (SHA256SUMS).

The head has no CPU (it holds the driver's queue actor); each worker node has one CPU, so one worker. The build
starts with node A only: its worker (rank 0) stages a unit, then stalls inside the encode of its next one,
holding that unit. Node B joins, its worker takes the units left; then node A's raylet, agents and workers are
SIGKILLed by pid. The held unit goes back to the queue, node B's worker (or its replacement) encodes it and
the build completes. All nodes share ROOT (one filesystem)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from helpers.exec_world import make_table, sums
from helpers.processes import wait_for
from helpers.ray_nodes import add_nodes, start_head
from latentforge.builder.run import build
from latentforge.config import load_config
from latentforge.executor.ray_session import processes_with_env
from latentforge.writers.staging import completed_units

pytestmark = pytest.mark.slow

CLIPS = 8  # unit_size 2 -> 4 units
STALL = "encode:3:sleep"  # rank 0: the first sample of its second unit (one sample per encode)


def _config(table: Path, root: Path, *sets: str):
    return load_config(None, [
        "dataset.reader=table", f"dataset.path={table}", "dataset.id_column=id", f"output.root={root}",
        "tokenizer.name=haar-4x8x8", "text.name=none", "frames.num_frames=9", "frames.height=32",
        "frames.width=48", "output.rows_per_shard=4", "output.unit_size=2", "output.min_free_bytes=0",
        "run.workers_per_gpu=0", *sets])


def test_build_survives_a_killed_worker_node(tmp_path, monkeypatch):
    table = make_table(tmp_path / "world", count=CLIPS)
    local = tmp_path / "local"
    build(_config(table, local), quiet=True)
    monkeypatch.setenv("LATENTFORGE_RAY_FAULT", f"0:{STALL}")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # the nodes were started without auth (loopback only)
    root = tmp_path / "cache"
    nodes = start_head()
    seen: dict[str, object] = {}

    def second_node_then_kill_the_first() -> None:
        try:
            stalled = lambda: bool(processes_with_env("LATENTFORGE_FAULT", STALL)) and "stalls at encode" in \
                nodes.worker_logs()  # noqa: E731
            assert wait_for(stalled, timeout=120), "rank 0 never stalled at its third encode"
            seen["staged_before_b"] = len(completed_units(root / "build"))
            add_nodes(nodes, ["node_b"])
            # node B's worker took the units left: the only unit missing is the one node A holds
            assert wait_for(lambda: len(completed_units(root / "build")) == CLIPS // 2 - 1, timeout=120), \
                "node B's worker did not stage the units node A was not holding"
            seen["killed"] = nodes.kill("node_a")
            assert wait_for(lambda: not nodes.pids("node_a")), f"{sorted(nodes.pids('node_a'))} outlived SIGKILL"
        except BaseException as error:  # noqa: BLE001 - reported by the test's thread
            seen["error"] = error
            nodes.kill_all()  # the build would wait on the stalled worker: end it

    try:
        add_nodes(nodes, ["node_a"])
        killer = threading.Thread(target=second_node_then_kill_the_first, daemon=True)
        killer.start()
        build(_config(table, root, "run.executor=ray", f"run.ray_address={nodes.address}", "run.procs=2"),
              quiet=True)
        killer.join(timeout=60)
        assert "error" not in seen, seen["error"]
        assert seen["staged_before_b"] == 1 and seen["killed"]
        assert sums(root) == sums(local)
    finally:
        nodes.close()
