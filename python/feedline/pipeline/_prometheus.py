"""PrometheusExporter: pipeline statistics as Prometheus metrics.

A stats callback (``build(stats_callback=exporter, report_stats_interval=s)``)
that keeps each pipeline's latest snapshot and exposes it through the
``prometheus_client`` library (``pip install feedline[prometheus]``): as a
collector of a registry that a program already serves, or on a port of its
own (``port=``, served by the library's HTTP server). Nothing is counted
here: every value is the engine's, read from the snapshot at scrape time.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["PrometheusExporter"]

# (metric suffix, StageStats attribute, help) of the per-stage counters.
_STAGE_COUNTERS = (
    ("items_in", "items_in", "Items the stage took from its input queue."),
    ("items_out", "items_out", "Items the stage emitted downstream."),
    ("calls", "calls", "Op calls (generator pulls, flushes)."),
    ("failures", "failures", "Calls that failed."),
    ("wait_input_seconds", "wait_input", "Seconds the stage sat idle with its input empty."),
    ("wait_output_seconds", "wait_output", "Seconds the stage sat idle with its output full."),
    ("gil_wait_seconds", "gil_wait", "Seconds the stage's Python calls waited to take the GIL."),
    ("gil_held_seconds", "gil_held", "CPU seconds the stage's Python calls used holding the GIL."),
)


class PrometheusExporter:
    """Exposes the latest :class:`PipelineStats` of each pipeline it is the
    ``stats_callback`` of, labelled by pipeline and stage.

    Args:
        registry: the ``prometheus_client`` registry to join; default a
            registry of its own (see :meth:`text`).
        port: serve the registry on this port (0: any free one, see
            :attr:`port`); None (default): serve nothing.
        addr: the address to serve on.
        prefix: the prefix of every metric name.
    """

    def __init__(
        self, registry: Any = None, *, port: int | None = None, addr: str = "0.0.0.0", prefix: str = "feedline"
    ):
        try:
            from prometheus_client import CollectorRegistry, start_http_server
        except ImportError as e:
            raise ImportError("PrometheusExporter needs prometheus_client: pip install feedline[prometheus]") from e
        self._lock = threading.Lock()
        self._latest: dict[str, Any] = {}
        self._prefix = prefix
        self.registry = registry if registry is not None else CollectorRegistry()
        self.registry.register(self)
        self._server = None
        self.port: int | None = None
        if port is not None:
            self._server, self._thread = start_http_server(port, addr, registry=self.registry)
            self.port = self._server.server_port

    def __call__(self, stats) -> None:
        with self._lock:
            self._latest[stats.name] = stats

    def text(self) -> str:
        """The registry in the Prometheus text exposition format."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry).decode()

    def close(self) -> None:
        """Stops serving (when it serves) and leaves the registry."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        try:
            self.registry.unregister(self)
        except KeyError:
            pass

    def collect(self):
        """The metrics of the latest snapshots (called by the registry)."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily

        p = self._prefix
        with self._lock:
            latest = list(self._latest.values())
        delivered = CounterMetricFamily(f"{p}_items_delivered", "Items handed to the consumer.", labels=["pipeline"])
        elapsed = GaugeMetricFamily(f"{p}_elapsed_seconds", "Seconds since the pipeline started.", labels=["pipeline"])
        counters = {
            attr: CounterMetricFamily(f"{p}_stage_{suffix}", text, labels=["pipeline", "stage", "kind"])
            for suffix, attr, text in _STAGE_COUNTERS
        }
        op = SummaryMetricFamily(
            f"{p}_stage_op_seconds", "Duration of each call.", labels=["pipeline", "stage", "kind"]
        )
        quantiles = GaugeMetricFamily(
            f"{p}_stage_op_seconds_quantile",
            "Quantiles of the call durations (within 12.5%).",
            labels=["pipeline", "stage", "kind", "quantile"],
        )
        concurrency = GaugeMetricFamily(
            f"{p}_stage_concurrency", "The stage's maximum calls in flight.", labels=["pipeline", "stage", "kind"]
        )
        depth = GaugeMetricFamily(f"{p}_queue_depth", "Items in the stage's input queue.", labels=["pipeline", "stage"])
        capacity = GaugeMetricFamily(f"{p}_queue_capacity", "The input queue's capacity.", labels=["pipeline", "stage"])
        occupancy = GaugeMetricFamily(
            f"{p}_queue_occupancy", "The input queue's mean depth / capacity since start.", labels=["pipeline", "stage"]
        )
        bottleneck = GaugeMetricFamily(
            f"{p}_bottleneck",
            "1 for the stage that limits throughput, labelled with the kind of limit.",
            labels=["pipeline", "stage", "kind"],
        )
        for stats in latest:
            delivered.add_metric([stats.name], stats.items_delivered)
            elapsed.add_metric([stats.name], stats.elapsed)
            for s in stats.stages:
                labels = [stats.name, s.name, s.kind]
                for attr, family in counters.items():
                    family.add_metric(labels, getattr(s, attr))
                op.add_metric(labels, count_value=s.op_time.count, sum_value=s.op_time.total)
                for q in (0.5, 0.9, 0.99):
                    quantiles.add_metric([*labels, str(q)], s.op_time.quantile(q))
                concurrency.add_metric(labels, s.concurrency)
                if s.kind != "source":
                    q = s.input_queue
                    depth.add_metric([stats.name, s.name], q.depth)
                    capacity.add_metric([stats.name, s.name], q.capacity)
                    occupancy.add_metric([stats.name, s.name], q.occupancy)
            b = stats.bottleneck()
            if b.kind != "none":
                bottleneck.add_metric([stats.name, b.stage_name, b.kind], 1)
        yield delivered
        yield elapsed
        yield from counters.values()
        yield op
        yield quantiles
        yield concurrency
        yield depth
        yield capacity
        yield occupancy
        yield bottleneck
