# SPDX-License-Identifier: Apache-2.0
"""PrometheusExporter: the engine's statistics in the Prometheus text format,
parsed with the client library's own parser."""

from __future__ import annotations

import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from feedline.pipeline import PipelineBuilder, PrometheusExporter


def slow(x):
    time.sleep(0.002)
    if x == 7:
        raise ValueError("bad item")
    return x


def run(exporter, name):
    pipeline = (
        PipelineBuilder()
        .add_source(range(100))
        .pipe(lambda x: x, concurrency=2)
        .pipe(slow, concurrency=2)
        .add_sink(4)
        .build(num_threads=4, report_stats_interval=0.05, stats_callback=exporter, name=name)
    )
    with pipeline.auto_stop():
        assert len(list(pipeline)) == 99
    return pipeline.stats()


def samples(text):
    """{(sample name, frozenset(labels)): value} of an exposition."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def test_the_exposition_parses_and_agrees_with_the_stats():
    exporter = PrometheusExporter()
    try:
        stats = run(exporter, "train")
        got = samples(exporter.text())
    finally:
        exporter.close()
    assert got[("feedline_items_delivered_total", frozenset({("pipeline", "train")}))] == 99
    for s in stats.stages:
        labels = frozenset({("pipeline", "train"), ("stage", s.name), ("kind", s.kind)})
        assert got[("feedline_stage_calls_total", labels)] == s.calls
        assert got[("feedline_stage_failures_total", labels)] == s.failures
        assert got[("feedline_stage_items_out_total", labels)] == s.items_out
        assert got[("feedline_stage_op_seconds_count", labels)] == s.op_time.count
        assert abs(got[("feedline_stage_op_seconds_sum", labels)] - s.op_time.total) < 1e-6
        assert abs(got[("feedline_stage_gil_wait_seconds_total", labels)] - s.gil_wait) < 1e-6
    assert (
        got[
            (
                "feedline_stage_failures_total",
                frozenset({("pipeline", "train"), ("stage", "2:slow[2]"), ("kind", "pipe")}),
            )
        ]
        == 1
    )
    b = stats.bottleneck()
    assert b.stage_name == "2:slow[2]"
    key = ("feedline_bottleneck", frozenset({("pipeline", "train"), ("stage", b.stage_name), ("kind", b.kind)}))
    assert got[key] == 1


def test_it_serves_the_metrics_on_a_port():
    exporter = PrometheusExporter(port=0, addr="127.0.0.1")
    try:
        run(exporter, "served")
        with urllib.request.urlopen(f"http://127.0.0.1:{exporter.port}/metrics", timeout=30) as r:
            text = r.read().decode()
    finally:
        exporter.close()
    got = samples(text)
    assert got[("feedline_items_delivered_total", frozenset({("pipeline", "served")}))] == 99
