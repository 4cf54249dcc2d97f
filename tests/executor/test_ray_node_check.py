"""A Ray node that cannot see the dataset is excluded before its first unit, with a message naming it, and its
units go to the other nodes: never `unreadable` rejects. When no node passes, the build stops before any unit.

The blind node is a real `ray start` in its own mount namespace, where the dataset folder is an empty tmpfs;
the driver (this process) and the other node see it. Each node runs one worker (1 CPU)."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

from helpers.exec_world import make_table, sums
from helpers.ray_nodes import add_nodes, can_hide_folders, start_head
from latentforge.builder.run import build
from latentforge.config import load_config
from latentforge.errors import LatentforgeError
from latentforge.writers.staging import completed_units

pytestmark = pytest.mark.slow

CLIPS = 8  # unit_size 2 -> 4 units


def _config(table: Path, root: Path, *sets: str):
    return load_config(None, [
        "dataset.reader=table", f"dataset.path={table}", "dataset.id_column=id", f"output.root={root}",
        "tokenizer.name=haar-4x8x8", "text.name=none", "frames.num_frames=9", "frames.height=32",
        "frames.width=48", "output.rows_per_shard=4", "output.unit_size=2", "output.min_free_bytes=0",
        "run.workers_per_gpu=0", *sets])


def _stats(root: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((root / "build").glob("stats-*.json"))]


@pytest.mark.skipif(not can_hide_folders(), reason="needs mount namespaces (unshare) to give a node its own view")
def test_node_that_cannot_see_the_dataset_is_excluded(tmp_path, monkeypatch, capfd):
    world = tmp_path / "world"
    table = make_table(world, count=CLIPS)
    local = tmp_path / "local"
    build(_config(table, local), quiet=True)
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # the nodes were started without auth (loopback only)
    nodes = start_head()
    try:
        add_nodes(nodes, ["blind"], hide=world)
        root = tmp_path / "cache"
        config = _config(table, root, "run.executor=ray", f"run.ray_address={nodes.address}", "run.procs=2")
        with pytest.raises(LatentforgeError, match="no node of the Ray cluster passed the node check") as info:
            build(config, quiet=True)
        message = str(info.value)
        assert "dataset check failed for " + str(world / "videos") in message and "not readable" in message
        assert re.search(rf"{re.escape(socket.gethostname())} \(node [0-9a-f]{{12}}, [0-9.]+\): dataset check", message)
        assert not completed_units(root / "build") and not (root / "rejects.jsonl").exists()
        [failed] = _stats(root)
        assert failed["outcome"] == "failed"
        assert [f["kind"] for f in failed["node_faults"]] == ["excluded"]

        add_nodes(nodes, ["seeing"])
        capfd.readouterr()
        build(config)  # resumes; the blind node is excluded again, the other does every unit
        out = capfd.readouterr().out
        assert "excluded from this build, its units go to other nodes" in out and "dataset check failed" in out
        assert sums(root) == sums(local)
        assert "unreadable" not in (root / "rejects.jsonl").read_text()
        done = _stats(root)[-1]
        assert done["outcome"] == "complete"
        excluded = [f for f in done["node_faults"] if f["kind"] == "excluded"]
        assert len(excluded) == 1 and "dataset check failed" in excluded[0]["detail"]
        workers = [r for r in done["ranks"] if r["samples"]]
        assert sum(r["samples"] for r in workers) == CLIPS and len({r["node_id"] for r in workers}) == 1
        assert excluded[0]["node"] not in {r["node"] for r in workers}
    finally:
        nodes.close()
