"""A build over a three-node Ray cluster on this machine (a head and two worker nodes, each its own `ray start`)
survives losing a worker node mid-run, and its cache equals a local build's (SHA256SUMS).

The head has no CPU (it holds the driver's queue actor); each worker node has one CPU, so one worker. The build
starts with node A only: its worker stages a unit, then stalls inside the encode of its next one,
holding that unit. Node B joins, its worker takes the units left; then node A's raylet, agents and workers are
SIGKILLed by pid. The held unit goes back to the queue, node B's worker (or its replacement) encodes it and
the build completes. All nodes share ROOT (one filesystem). The driver is the CLI in its own process."""

from __future__ import annotations

import subprocess

import pytest

from helpers.exec_world import build_args, cli_command, cli_env, exec_config, make_table, sums
from helpers.processes import wait_for
from helpers.ray_nodes import add_nodes, start_head
from latentforge.builder.run import build
from latentforge.writers.staging import completed_units

pytestmark = pytest.mark.slow

CLIPS = 8  # unit_size 2 -> 4 units
STALL = "encode:3:sleep"  # node A's worker: the first sample of its second unit (one sample per encode)




def test_build_survives_a_killed_worker_node(tmp_path):
    table = make_table(tmp_path / "world", count=CLIPS)
    local = tmp_path / "local"
    build(exec_config(table, local), quiet=True)
    root = tmp_path / "cache"
    nodes = start_head()
    try:
        # every worker on node A stalls (its environment reaches them); Ray may create either rank first
        add_nodes(nodes, ["node_a"], env={"LATENTFORGE_FAULT": STALL})
        # the driver in its own process, as a user runs it (and free of this process's earlier Ray sessions)
        args = build_args(table, root, "--executor", "ray", "--ray-address", nodes.address, "--procs", "2",
                          "--workers-per-gpu", "0")
        with open(tmp_path / "driver.txt", "w") as log:
            driver = subprocess.Popen(cli_command(args), env=cli_env(RAY_AUTH_MODE="disabled"), stdout=log,
                                      stderr=subprocess.STDOUT)
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
        assert sums(root) == sums(local)
    finally:
        if "driver" in locals() and driver.poll() is None:
            driver.kill()
            driver.wait()
        nodes.close()
