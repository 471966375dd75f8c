# SPDX-License-Identifier: Apache-2.0
"""Autotune (docs/stats.md#autotune): the pipeline moves its stages'
concurrency and its active threads while it runs, for native and Python ops,
keeps every item, stays within its CPU budget, and says what it did."""

from __future__ import annotations

import json
import logging
import os
import time

import _feedline_testing as testing
import pytest

from feedline.pipeline import Autotune, AutotuneDecision, PipelineBuilder, PipelineStats

FAST = Autotune(interval=0.02, max_concurrency=8, cpus=4)  # a budget of 2 CPUs


def raises(stats, stage):
    return [d for d in stats.autotune.decisions if d.stage == stage and d.after > d.before]


def test_a_sleeping_native_stage_is_raised_and_every_item_kept_in_order():
    p = (
        PipelineBuilder()
        .add_source(range(600))
        .pipe(testing.sleep(1000), output_order="input")
        .add_sink(8)
        .build(num_threads=1, autotune=FAST)
    )
    with p.auto_stop():
        got = list(p)
    assert got == list(range(600))
    s = p.stats()
    assert s.autotune.enabled
    assert s.autotune.cpu_budget == pytest.approx(2.0)
    assert raises(s, 1), s.autotune.decisions
    assert s.stages[1].concurrency > 1
    assert s.num_threads > 1
    d = s.autotune.decisions[0]
    assert isinstance(d, AutotuneDecision)
    assert d.target == "1:sleep" and d.before == 1 and d.after > 1
    assert "bottleneck" in d.reason and d.at > 0
    assert s.autotune.decisions_total == len(s.autotune.decisions)
    # Exports carry them; the table shows the settings and the changes.
    record = json.loads(s.to_json())
    assert record["autotune"]["decisions"][0]["target"] == "1:sleep"
    back = PipelineStats.from_json(s.to_json())
    assert [(x.target, x.before, x.after) for x in back.autotune.decisions] == [
        (x.target, x.before, x.after) for x in s.autotune.decisions
    ]
    assert "autotune: threads=" in s.format_table()


def test_a_python_op_that_waits_without_the_gil_is_raised():
    def io(x):
        time.sleep(0.001)
        return x

    p = PipelineBuilder().add_source(range(500)).pipe(io).add_sink(8).build(num_threads=1, autotune=FAST)
    with p.auto_stop():
        got = sorted(p)
    assert got == list(range(500))
    assert raises(p.stats(), 1), p.stats().autotune.decisions


def test_each_change_is_logged(caplog):
    with caplog.at_level(logging.INFO, logger="feedline"):
        p = (
            PipelineBuilder()
            .add_source(range(300))
            .pipe(testing.sleep(1000))
            .add_sink(8)
            .build(num_threads=1, autotune=FAST)
        )
        with p.auto_stop():
            for _ in p:
                pass
    lines = [r.getMessage() for r in caplog.records if "autotune:" in r.getMessage()]
    assert lines, "no autotune decision was logged"
    assert "1:sleep concurrency 1 -> " in lines[0]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs to go over a 1-CPU budget")
def test_a_pool_over_its_cpu_budget_gets_fewer_threads():
    # Two calls of CPU work at a time on two CPUs; the budget is one CPU.
    budget = Autotune(cpu_budget=0.5, cpus=2, interval=0.05)
    p = (
        PipelineBuilder()
        .add_source(range(10**6))
        .pipe(testing.cpu_work(1000), concurrency=2)
        .add_sink(8)
        .build(num_threads=2, autotune=budget)
    )
    lowered = []
    with p.auto_stop():
        for i, _ in enumerate(p):
            if i % 50 == 0:
                lowered = [d for d in p.stats().autotune.decisions if d.stage == -1 and d.after < d.before]
                if lowered:
                    break
            assert i < 20000, "the pool was never brought within its budget"
        # From 2 threads, or from 3 when a loaded machine kept the pool under
        # its budget long enough for it to be raised first.
        assert lowered[0].before >= 2 and lowered[0].after == 1
        assert "over its budget" in lowered[0].reason
        # From then on one thread runs the work: at most the budget.
        n = 0
        for _ in p:
            n += 1
            if n == 400:
                break
        s = p.stats()
    assert s.num_threads == 1
    assert s.autotune.cpu_used <= s.autotune.cpu_budget * 1.1


def test_off_by_default_and_validated():
    p = PipelineBuilder().add_source(range(10)).pipe(lambda x: x).add_sink(2).build(num_threads=1)
    with p.auto_stop():
        list(p)
    assert not p.stats().autotune.enabled
    assert "autotune" not in json.loads(p.stats().to_json())
    with pytest.raises(ValueError, match="cpu_budget"):
        Autotune(cpu_budget=0)
    with pytest.raises(ValueError, match="max_concurrency"):
        Autotune(max_concurrency=0)
    with pytest.raises(ValueError, match="interval"):
        Autotune(interval=0)
    with pytest.raises(TypeError, match="autotune takes"):
        PipelineBuilder().add_source(range(3)).add_sink(2).build(num_threads=1, autotune="yes")


def test_autotune_true_uses_the_defaults():
    p = PipelineBuilder().add_source(range(20)).pipe(lambda x: x).add_sink(2).build(num_threads=1, autotune=True)
    with p.auto_stop():
        assert sorted(p) == list(range(20))
    s = p.stats()
    assert s.autotune.enabled
    assert s.autotune.cpu_budget == pytest.approx(0.5 * len(os.sched_getaffinity(0)))
