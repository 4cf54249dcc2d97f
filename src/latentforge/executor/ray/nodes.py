"""Which Ray nodes a build places workers on: every node but those its node check excluded.

Kept by the driver (executor/ray/unit_run.py). An excluded node gets no worker again in this build (a label
selector on Ray's node id); when no alive node with room for a worker is left, the build stops before any
unit runs there, listing each excluded node and its failed check."""

from __future__ import annotations

from typing import Any

from ...errors import LatentforgeError
from ..node_faults import node_faults
from ..rank_stats import RankStats

NODE_ID_LABEL = "ray.io/node-id"


class NodeBook:
    def __init__(self, ray: Any, num_gpus: int):
        self.ray, self.num_gpus = ray, num_gpus
        self.excluded: dict[str, str] = {}  # node id -> "<node>: <failed check>"
        self._faults_said: set[str] = set()

    def placement(self) -> dict[str, Any]:
        """Actor options that keep a new worker off the excluded nodes."""
        if not self.excluded:
            return {}
        return {"label_selector": {NODE_ID_LABEL: f"!in({','.join(sorted(self.excluded))})"}}

    def exclude(self, stats: RankStats) -> str:
        """Exclude the node of a worker that failed its node check; returns the line to print. Raises when no
        node is left to run units."""
        self.excluded[stats.node_id] = f"{stats.node}: {stats.node_check}"
        if not self.usable():
            listed = "\n  ".join(self.excluded.values())
            raise LatentforgeError(f"no node of the Ray cluster passed the node check, so no unit can run:\n"
                                   f"  {listed}\nfix what each line says (or add nodes that pass), then rerun")
        return f"Ray node {stats.node} excluded from this build, its units go to other nodes: {stats.node_check}"

    def usable(self) -> list[str]:
        """Alive nodes, not excluded, with room for a worker (a CPU, and a GPU for GPU workers)."""
        usable = []
        for node in self.ray.nodes():
            resources = node.get("Resources", {})
            if (node.get("Alive") and node["NodeID"] not in self.excluded and resources.get("CPU", 0) >= 1
                    and resources.get("GPU", 0) >= self.num_gpus):
                usable.append(node["NodeID"])
        return usable

    def new_decode_faults(self, ranks: list[RankStats]) -> list[str]:
        """Lines for the nodes that newly meet the decode-fault rule (executor/node_faults.py), once each."""
        lines = []
        for fault in node_faults(ranks):
            if fault["kind"] == "decode_failures" and fault["node"] not in self._faults_said:
                self._faults_said.add(fault["node"])
                lines.append(f"node fault: Ray node {fault['node']}: {fault['detail']}; check its dataset mount "
                             "and codec libraries")
        return lines
