# SPDX-License-Identifier: Apache-2.0
"""Where the GIL goes: each stage's GIL wait and hold, and the bottleneck
named from them (docs/stats.md#the-gil)."""

from __future__ import annotations

import json
import time

import _feedline_testing as testing

from feedline.pipeline import PipelineBuilder


class Body:
    """A pure-Python op that burns `cost` seconds of CPU per call and
    records, from inside the call, its own wall and CPU time: what the
    engine's figures are checked against."""

    def __init__(self, cost):
        self.cost = cost
        self.wall = 0.0
        self.cpu = 0.0

    def __call__(self, x):
        w0, c0 = time.perf_counter(), time.thread_time()
        end = c0 + self.cost
        while time.thread_time() < end:
            pass
        # Under the GIL: no lock needed for the sums.
        self.wall += time.perf_counter() - w0
        self.cpu += time.thread_time() - c0
        return x


def run(*stages, n=240, num_threads=8):
    builder = PipelineBuilder().add_source(range(n))
    for op, concurrency in stages:
        builder = builder.pipe(op, concurrency=concurrency)
    pipeline = builder.add_sink(4).build(num_threads=num_threads)
    with pipeline.auto_stop():
        assert sorted(pipeline) == list(range(n))
    return pipeline.stats()


def test_contending_python_stages_report_their_gil_wait_and_hold():
    # The shape of the report: ops of 2 ms and 1 ms of Python, four threads
    # each. One GIL serialises them; every call first waits for it.
    slow, fast = Body(0.002), Body(0.001)
    stats = run((slow, 4), (fast, 4))
    for index, body in ((1, slow), (2, fast)):
        stage = stats.stages[index]
        assert stage.gil_acquisitions == stage.calls == 240
        # The true wait: the call's time that was not the body's (taking
        # the GIL before the body runs; converting is microseconds).
        true_wait = stage.op_time.total - body.wall
        assert true_wait > 0.05, (stage.name, true_wait)  # they did contend
        assert abs(stage.gil_wait - true_wait) <= 0.2 * true_wait, (stage.name, stage.gil_wait, true_wait)
        # The hold: the CPU time of the calls.
        assert abs(stage.gil_held - body.cpu) <= 0.2 * body.cpu, (stage.name, stage.gil_held, body.cpu)
    # The source is a Python generator too. The sink's figures are the
    # consumer's: it retook the GIL once per item, behind the stages.
    assert stats.stages[0].gil_acquisitions > 0
    sink = stats.stages[-1]
    assert sink.gil_acquisitions == 240
    assert sink.gil_wait > 0.05, sink.gil_wait
    assert sink.gil_held == 0


def test_a_gil_bound_pipeline_is_named_so_not_short_of_threads():
    stats = run((Body(0.002), 4), (Body(0.001), 4))
    # The calls look busy (their time includes the waits for the GIL): more
    # than twice the one thread that can run Python at a time...
    busy = sum(s.op_time.total for s in stats.stages[1:3]) / stats.elapsed
    assert busy > 2, busy
    # ...but the verdict is the GIL, not more threads.
    b = stats.bottleneck()
    assert b.kind == "gil", b
    assert b.stage == 1, b  # the stage that holds it longest
    assert "ProcessPoolExecutorConfig" in b.advice
    table = stats.format_table()
    assert "gil_wait" in table.splitlines()[1]
    assert f"bottleneck: {b.stage_name} (gil): Python held the GIL" in table
    record = json.loads(stats.to_json())
    assert record["bottleneck"]["kind"] == "gil"
    stage = record["stages"][1]
    assert stage["gil_acquisitions"] == 240
    assert abs(stage["gil_wait_s"] - stats.stages[1].gil_wait) < 1e-6


def test_a_sleeping_python_stage_holds_little_and_is_a_stage_bottleneck():
    def sleepy(x):
        time.sleep(0.004)  # releases the GIL
        return x

    stats = run((sleepy, 2), (lambda x: x, 2), n=120)
    stage = stats.stages[1]
    assert stage.gil_acquisitions == 120
    # Sleeping uses no CPU: a fraction of the 0.48 s slept (a hold after a
    # run of short ones is timed by the wall clock).
    assert stage.gil_held < 0.1, stage.gil_held
    b = stats.bottleneck()
    assert (b.kind, b.stage) == ("stage", 1), b
    assert "raise its concurrency (2)" in b.advice, b


def test_native_stages_take_no_gil():
    stats = run((testing.add(0), 2), (testing.add(0), 2), (lambda x: x, 2), n=50)
    # The first native op takes each Python int from the source: it converts
    # it under the GIL. The second gets native ints and never takes it.
    assert stats.stages[1].gil_acquisitions == 50
    assert stats.stages[2].gil_acquisitions == 0
    assert stats.stages[2].gil_wait == stats.stages[2].gil_held == 0
    assert stats.stages[3].gil_acquisitions == 50


def test_nothing_run_yet_has_no_bottleneck():
    pipeline = PipelineBuilder().add_source(range(3)).pipe(lambda x: x).add_sink(1).build(num_threads=1)
    b = pipeline.stats().bottleneck()
    assert (b.kind, b.stage, b.stage_name) == ("none", -1, "")
    assert "bottleneck:" not in pipeline.stats().format_table()
