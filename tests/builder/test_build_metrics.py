"""The Prometheus endpoints of a running build: the main process and its rank serve non-zero counters while
units are being encoded, parsed with prometheus_client's own parser, and the run stats JSON written when the
build stops holds the same numbers.

The build stalls its rank while the second unit is staged (LATENTFORGE_FAULT=stage:2:sleep), so it is still
running, with one unit done, whenever the test scrapes; SIGTERM then stops it and it writes its run stats."""

from __future__ import annotations

import json
import random
import signal
import socket
import subprocess
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from helpers.exec_world import build_args, cli_command, cli_env, make_table
from helpers.processes import wait_for
from latentforge.config.loading import load_config
from latentforge.errors import ConfigError
from latentforge.executor.metrics import MetricsServer

MISSING = {"id": "gone", "video": "videos/gone.mp4", "caption": "a clip that is not there"}


def free_port_pair() -> int:
    """A port P with P and P + 1 free on 127.0.0.1 (the main process and rank 0)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port < 65535:
            with socket.socket() as second:
                try:
                    second.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
            return port
    raise RuntimeError("no two adjacent free ports")


def _below_ephemeral_ports(count: int) -> int:
    """A port P with P .. P + count - 1 free on 127.0.0.1, below the kernel's ephemeral range: a port other
    processes get by binding port 0 (Ray's daemons, moto, other tests) is never one of them, so none of the
    block is taken between this check and the build's."""
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    for base in random.Random().sample(range(20000, low - count), 50):
        probes = [socket.socket() for _ in range(count)]
        try:
            for offset, probe in enumerate(probes):
                probe.bind(("127.0.0.1", base + offset))
            return base
        except OSError:
            continue
        finally:
            for probe in probes:
                probe.close()
    raise RuntimeError(f"no {count} adjacent free ports below {low}")


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels): value} from http://127.0.0.1:PORT/metrics; empty while it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return {}
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


@pytest.fixture
def stalled(tmp_path):
    """A build in a subprocess, stalled with one unit of two samples staged; killed at the end if still running."""
    table = make_table(tmp_path / "data", count=4, rows=[MISSING])
    root, stderr = tmp_path / "cache", tmp_path / "stderr.txt"
    port = free_port_pair()
    args = build_args(table, root, "--workers-per-gpu", "0", "--metrics-port", str(port))
    with open(stderr, "w") as sink:
        process = subprocess.Popen(cli_command(args), env=cli_env(LATENTFORGE_FAULT="stage:2:sleep"),
                                   stdout=subprocess.DEVNULL, stderr=sink)
    try:
        def one_unit_done() -> bool:
            found = (scrape(port), scrape(port + 1))
            got = [values.get(("latentforge_samples_encoded_total", ()), 0) for values in found]
            return all(value > 0 for value in got) or process.poll() is not None

        assert wait_for(one_unit_done) and process.poll() is None, stderr.read_text()[-3000:]
        yield process, port, root, stderr
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def test_endpoints_serve_nonzero_counters_during_a_build_and_the_run_stats_agree(stalled):
    process, port, root, stderr = stalled
    main, rank = scrape(port), scrape(port + 1)
    for values in (main, rank):
        assert values[("latentforge_samples_encoded_total", ())] == 2  # one unit of two samples
        assert values[("latentforge_samples_per_second", ())] > 0
        assert values[("latentforge_stage_seconds_total", (("stage", "encode"),))] > 0
        assert values[("latentforge_stage_seconds_total", (("stage", "decode"),))] > 0
        assert ("latentforge_stage_seconds_total", (("stage", "encoder_wait"),)) in values
        assert values[("latentforge_gpu_memory_bytes", (("rank", "0"),))] == 0  # a CPU build
    assert main[("latentforge_rejects_total", (("reason", "missing_source"),))] == 1
    assert main[("latentforge_stage_seconds_total", (("stage", "preflight"),))] > 0  # a slow start shows where
    assert main[("latentforge_queue_depth", (("queue", "units"),))] == 2  # 3 units (5 samples), 1 staged
    assert main[("latentforge_rss_bytes", (("process", "main"),))] > 50e6  # torch alone is more
    assert rank[("latentforge_rss_bytes", (("process", "rank0"),))] > 50e6
    assert {("latentforge_queue_depth", (("queue", q),)) for q in ("decode", "staging")} <= set(rank)

    # SIGTERM stops the build cleanly; its run stats hold what the main process served
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 143, stderr.read_text()[-3000:]
    [path] = (root / "build").glob("stats-*.json")
    metrics = json.loads(path.read_text())["metrics"]
    assert metrics["samples_encoded"] == main[("latentforge_samples_encoded_total", ())]
    assert metrics["rejects"] == {"missing_source": 1}
    assert metrics["stage_seconds"]["encode"] == main[("latentforge_stage_seconds_total", (("stage", "encode"),))]
    assert metrics["queue_depth"] == {"units": 2}
    assert metrics["stage_seconds"]["preflight"] == main[("latentforge_stage_seconds_total", (("stage", "preflight"),))]


def test_a_port_outside_the_range_is_a_config_error():
    with pytest.raises(ConfigError, match=r"run.metrics_port=70000 is not a TCP port; give 1..65535"):
        load_config(preset="cosmos-predict2-480p", overrides=["run.metrics_port=70000"],
                    extra={"dataset": {"path": ["x.csv"]}, "output": {"root": "out"}})


def test_a_port_in_use_names_the_port_and_the_fix():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=f"cannot bind 127.0.0.1:{port}: the port is in use; give another"):
            MetricsServer("127.0.0.1", port, dict, "the test")


@pytest.mark.parametrize("taken_offset, who", [(0, "the build's main process"), (1, "rank 0"), (2, "rank 1")])
def test_every_port_is_checked_before_anything_is_written(tmp_path, cli, taken_offset, who):
    table = make_table(tmp_path / "data", count=2)
    base = _below_ephemeral_ports(3)  # the main process's port, then rank 0's and rank 1's
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", base + taken_offset))
        taken.listen()
        root = tmp_path / "cache"
        done = cli(build_args(table, root, "--procs", "2", "--device", "cpu", "--metrics-port", str(base)))
    assert done.returncode == 2, done.stderr
    assert f"the metrics endpoint of {who} cannot bind 127.0.0.1:{base + taken_offset}" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not root.exists()
