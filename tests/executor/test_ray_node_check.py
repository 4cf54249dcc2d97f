"""A Ray node that cannot see the dataset is excluded before its first unit, with a message naming it, and its
units go to the other nodes: never `unreadable` rejects. When no node passes, the build stops before any unit.

The blind node is a real `ray start` in its own mount namespace, where the dataset folder is an empty tmpfs;
the driver (the CLI in its own process) and the other node see it. Each node runs one worker (1 CPU)."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

from helpers.exec_world import build_args, exec_config, make_table, run_cli, sums
from helpers.ray_nodes import add_nodes, can_hide_folders, start_head
from latentforge.builder.run import build
from latentforge.writers.staging import completed_units

pytestmark = pytest.mark.slow

CLIPS = 8  # unit_size 2 -> 4 units




def _stats(root: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((root / "build").glob("stats-*.json"))]


@pytest.mark.skipif(not can_hide_folders(), reason="needs mount namespaces (unshare) to give a node its own view")
def test_node_that_cannot_see_the_dataset_is_excluded(tmp_path):
    world = tmp_path / "world"
    table = make_table(world, count=CLIPS)
    local = tmp_path / "local"
    build(exec_config(table, local), quiet=True)
    nodes = start_head()
    try:
        add_nodes(nodes, ["blind"], hide=world)
        root = tmp_path / "cache"
        # the driver in its own process, as a user runs it (and free of this process's earlier Ray sessions)
        args = [a for a in build_args(table, root, "--executor", "ray", "--ray-address", nodes.address, "--procs",
                                      "2", "--workers-per-gpu", "0") if a != "--quiet"]
        alone = run_cli(args, timeout=300, RAY_AUTH_MODE="disabled")
        assert alone.returncode == 1, alone.stderr
        assert "no node of the Ray cluster passed the node check" in alone.stderr
        assert re.search(rf"{re.escape(socket.gethostname())} \(node [0-9a-f]{{12}}, [0-9.]+\): dataset check failed "
                         rf"for {re.escape(str(world / 'videos'))}/clip\d+\.mp4: sample clip\d+'s source is not "
                         r"readable \(No such file or directory\); mount the dataset", alone.stderr), alone.stderr
        assert not completed_units(root / "build") and not (root / "rejects.jsonl").exists()
        [failed] = _stats(root)
        assert failed["outcome"] == "failed"
        assert [f["kind"] for f in failed["node_faults"]] == ["excluded"]

        add_nodes(nodes, ["seeing"])
        done = run_cli(args, timeout=300, RAY_AUTH_MODE="disabled")  # resumes; the blind node is excluded again
        assert done.returncode == 0, done.stderr
        assert "excluded from this build, its units go to other nodes: dataset check failed" in done.stdout
        assert sums(root) == sums(local)
        assert "unreadable" not in (root / "rejects.jsonl").read_text()
        stats = _stats(root)[-1]
        assert stats["outcome"] == "complete"
        excluded = [f for f in stats["node_faults"] if f["kind"] == "excluded"]
        assert len(excluded) == 1 and "dataset check failed" in excluded[0]["detail"]
        workers = [r for r in stats["ranks"] if r["samples"]]
        assert sum(r["samples"] for r in workers) == CLIPS and len({r["node_id"] for r in workers}) == 1
        assert excluded[0]["node"] not in {r["node"] for r in workers}
    finally:
        nodes.close()
