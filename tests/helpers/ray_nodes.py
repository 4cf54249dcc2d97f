"""Ray nodes started as separate processes on loopback (`ray start`), and the processes that belong to each.

Each node is started with its own marker in the environment; Ray's daemons (raylet, agents, workers) inherit
it, so the processes of one node are found in /proc and killed by pid, never by name (other tests on this
machine may run their own Ray).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from helpers import REPO
from helpers.processes import GENEROUS, wait_for
from latentforge.executor.ray.session import processes_with_env, with_descendants

MARKER = "LATENTFORGE_TEST_RAY_NODE"
RAY = [sys.executable, "-m", "ray.scripts.scripts"]


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports. Every probe stays bound until all are chosen: a port probed and released at
    once can be handed out again by the next probe (seen: Ray refusing a node whose node manager and metrics
    export had been given the same port)."""
    with contextlib.ExitStack() as stack:
        probes = [stack.enter_context(socket.socket()) for _ in range(count)]
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in probes]


@dataclass
class RayNodes:
    """A head (no CPUs: it holds the driver's queue actor, never a worker) and worker nodes of one CPU each."""

    address: str
    temp_dir: Path
    markers: dict[str, str] = field(default_factory=dict)  # node name -> marker value
    killed: set[str] = field(default_factory=set)  # nodes SIGKILLed: the GCS counts them alive for ~16 s more

    def pids(self, name: str) -> set[int]:
        """The node's processes: those with its marker and their children (the raylet makes its agents' environment)."""
        return with_descendants(processes_with_env(MARKER, self.markers[name]))

    def kill(self, name: str) -> set[int]:
        """SIGKILL every process of one node (raylet, agents, workers); returns the pids signalled."""
        pids = self.pids(name)
        if pids:
            self.killed.add(name)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return pids

    def stop(self, names: list[str]) -> None:
        """Stop nodes as `ray stop` does: SIGTERM to each raylet, which takes its node out of the cluster at once
        (a SIGKILLed node stays alive to the GCS until its health checks fail), and wait for its processes to
        end; whatever is left after a generous deadline is SIGKILLed (and the node counted as killed)."""
        for name in names:
            for pid in self.pids(name):
                try:
                    if Path(f"/proc/{pid}/comm").read_text().strip() == "raylet":
                        os.kill(pid, signal.SIGTERM)
                except (OSError, ProcessLookupError):
                    pass
        if not wait_for(lambda: not any(self.pids(name) for name in names), timeout=GENEROUS):
            for name in names:
                self.kill(name)

    def kill_all(self) -> None:
        for name in self.markers:
            self.kill(name)

    def worker_logs(self) -> str:
        """What the Ray workers printed to stderr so far."""
        text = []
        for log in self.temp_dir.glob("session_*/logs/worker-*.err"):
            try:
                text.append(log.read_text(errors="replace"))
            except OSError:
                pass
        return "\n".join(text)

    def close(self) -> None:
        self.kill_all()
        shutil.rmtree(self.temp_dir, ignore_errors=True)


OWN_PORT_FLAGS = ("dashboard-agent-listen-port", "dashboard-agent-grpc-port", "metrics-export-port",
                  "runtime-env-agent-port", "node-manager-port", "object-manager-port")


def _own_ports(ports: list[int]) -> list[str]:
    """Ports a node would otherwise take from fixed defaults (the agent's 52365, ...): two nodes on one machine
    would collide ("bind: Address already in use") and the second never registers. `ports`: distinct free ports,
    one per flag."""
    return [f"--{flag}={port}" for flag, port in zip(OWN_PORT_FLAGS, ports, strict=True)]


def _ray_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LATENTFORGE_FAULT", "LATENTFORGE_RAY_FAULT"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "src"), env.get("PYTHONPATH")) if p)
    env["RAY_AUTH_MODE"] = "disabled"  # loopback only; no token to pass to every process
    # a node registers within 30 s by default: not always enough on a loaded two-core machine
    env["RAY_raylet_start_wait_time_s"] = "180"
    return env


def _hidden(command: list[str], hide: Path | None) -> list[str]:
    """`command` in its own mount namespace where `hide` is an empty tmpfs: a node that cannot see that folder."""
    if hide is None:
        return command
    user = [] if os.geteuid() == 0 else ["--map-root-user"]
    script = 'mount -t tmpfs tmpfs "$0" && exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", *user, "sh", "-c", script, str(hide), *command]


def can_hide_folders() -> bool:
    """Whether this machine lets a process have its own mount namespace (unshare)."""
    with tempfile.TemporaryDirectory() as folder:
        probe = subprocess.run(_hidden(["true"], Path(folder)), capture_output=True)
    return probe.returncode == 0


def start_head() -> RayNodes:
    """`ray start --head` on loopback with 0 CPUs: it holds the driver's queue actor, never a worker. One temp
    dir for the head and every node added (Ray keeps one session folder per machine), short because Ray's
    socket paths in it must fit in 107 bytes."""
    port, *own = free_ports(1 + len(OWN_PORT_FLAGS))
    nodes = RayNodes(f"127.0.0.1:{port}", Path(tempfile.mkdtemp(prefix="lf-ray-", dir="/tmp")))
    try:
        nodes.markers["head"] = uuid.uuid4().hex
        # no autoscaler monitor (nothing here scales) and no dashboard modules: each is a Python process that
        # costs seconds of a loaded two-core machine's CPU to start. This node's log monitor serves every node:
        # they share the temp dir, and Ray wants one log monitor per machine
        args = ["--head", f"--port={port}", "--node-ip-address=127.0.0.1", "--num-cpus=0", "--num-gpus=0",
                "--include-dashboard=false", "--no-monitor", f"--temp-dir={nodes.temp_dir}", "--disable-usage-stats",
                *_own_ports(own)]
        done = subprocess.run([*RAY, "start", *args], env={**_ray_env(), MARKER: nodes.markers["head"]},
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"ray start --head failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    except BaseException:
        nodes.close()
        raise
    return nodes


def add_nodes(nodes: RayNodes, names: list[str], hide: Path | None = None, env: dict[str, str] | None = None,
              gpus: int = 0) -> None:
    """One `ray start --address` per name, started together, each with 1 CPU and `gpus` GPUs (nodes on one host
    may all claim the same GPU); `hide`: a folder they do not see; `env`: more environment for the node's processes
    (its workers inherit it)."""
    starting = []
    ports = free_ports(len(OWN_PORT_FLAGS) * len(names))  # distinct across the nodes started together too
    for index, name in enumerate(names):
        nodes.markers[name] = uuid.uuid4().hex
        own = ports[index * len(OWN_PORT_FLAGS) : (index + 1) * len(OWN_PORT_FLAGS)]
        # no log monitor of its own: the head's watches the shared temp dir (one per machine, as Ray wants)
        args = [f"--address={nodes.address}", "--node-ip-address=127.0.0.1", "--num-cpus=1", f"--num-gpus={gpus}",
                "--include-log-monitor=false", "--disable-usage-stats", *_own_ports(own)]
        starting.append(subprocess.Popen(_hidden([*RAY, "start", *args], hide),
                                         env={**_ray_env(), **(env or {}), MARKER: nodes.markers[name]},
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    failures = []
    for process in starting:
        output, _ = process.communicate(timeout=120)
        if process.returncode != 0:
            failures.append(f"ray start --address failed ({process.returncode}):\n{output}")
    if failures:
        nodes.close()
        raise RuntimeError("\n".join(failures))


def start_nodes(workers: list[str]) -> RayNodes:
    """A head and one worker node per name in `workers`."""
    nodes = start_head()
    add_nodes(nodes, workers)
    return nodes


@contextlib.contextmanager
def local_ray(cpus: int = 2):
    """This process connected to a one-node Ray on loopback with `cpus` CPUs, whose workers import latentforge from
    this checkout; a build run in this process uses it (and leaves it running)."""
    import ray

    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "src"), saved) if p)
    ray.init(address="local", num_cpus=cpus, include_dashboard=False, _node_ip_address="127.0.0.1",
             log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()
        if saved is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = saved
