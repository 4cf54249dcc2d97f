"""Prometheus endpoints of a running build (run.metrics_port): the main process and every rank serve the
numbers their run statistics hold, read at each scrape, so the endpoint and build/stats-<utc>.json never
disagree (docs/execution.md).

A metrics dict maps a key of METRICS to a number, or to {label value: number} for a labelled metric.
"""

from __future__ import annotations

import errno
import os
import socket
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import ConfigError

Metrics = dict[str, Any]


@dataclass(frozen=True)
class Metric:
    name: str  # Prometheus name; counters are exposed with the _total suffix
    kind: str  # counter | gauge
    help: str
    label: str | None = None  # the label of a {label value: number} metric


METRICS = {
    "samples_encoded": Metric("latentforge_samples_encoded", "counter",
                              "planned samples of the units staged in this run (accepted or rejected)"),
    "samples_per_second": Metric("latentforge_samples_per_second", "gauge",
                                 "samples encoded in this run per second since it started"),
    "stage_seconds": Metric("latentforge_stage_seconds", "counter", "seconds per stage: decode (summed over "
                            "decode workers), encode, text, stage, encoder_wait (the encoder waiting on decode), "
                            "probe and commit (main process)", "stage"),
    "rejects": Metric("latentforge_rejects", "counter", "samples rejected in this run, by reason", "reason"),
    "queue_depth": Metric("latentforge_queue_depth", "gauge", "work waiting: units not yet staged (main "
                          "process); samples decoded or decoding ahead of the encoder, staged units not yet "
                          "written (rank)", "queue"),
    "rss_bytes": Metric("latentforge_rss_bytes", "gauge", "resident memory by process", "process"),
    "gpu_memory_bytes": Metric("latentforge_gpu_memory_bytes", "gauge", "peak GPU memory allocated by rank",
                               "rank"),
}


def current_rss_bytes() -> int:
    """Resident memory of this process now (Linux /proc), 0 where it cannot be read."""
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class _Collector:
    def __init__(self, read: Callable[[], Metrics]):
        self._read = read

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        for key, value in self._read().items():
            metric = METRICS[key]
            family = CounterMetricFamily if metric.kind == "counter" else GaugeMetricFamily
            if metric.label is None:
                yield family(metric.name, metric.help, value=float(value))
                continue
            labelled = family(metric.name, metric.help, labels=[metric.label])
            for label, number in sorted(value.items()):
                labelled.add_metric([str(label)], float(number))
            yield labelled


class MetricsServer:
    """An HTTP endpoint serving `read()` as Prometheus metrics until close()."""

    def __init__(self, host: str, port: int, read: Callable[[], Metrics], who: str):
        from prometheus_client import CollectorRegistry, start_http_server

        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector(read))
        try:
            self._server, self._thread = start_http_server(port, addr=host, registry=registry)
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                raise
            raise ConfigError(_port_in_use(who, host, port)) from None
        self.url = f"http://{host}:{port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def rank_metrics_port(base: int, rank: int) -> int:
    return base + 1 + rank


def check_port_free(host: str, port: int, who: str) -> None:
    """Raise the ConfigError the endpoint of `who` would raise at start, now (pre-flight: before anything is
    written or started). Bound and released at once, as the endpoint binds it (with SO_REUSEADDR)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                raise
            raise ConfigError(_port_in_use(who, host, port)) from None


def _port_in_use(who: str, host: str, port: int) -> str:
    return (f"the metrics endpoint of {who} cannot bind {host}:{port}: the port is in use; give another "
            "--metrics-port (ranks take the ports after it)")
