# SPDX-License-Identifier: Apache-2.0
"""Traces of stage activity in the Trace Event Format (Perfetto, Chrome)."""

from __future__ import annotations

import asyncio
import json
import time
from collections import defaultdict

import pytest

from feedline.pipeline import PipelineBuilder

# The fields the Trace Event Format requires of each phase used here.
REQUIRED = {
    "X": {"name", "ph", "ts", "dur", "pid", "tid"},
    "b": {"name", "cat", "ph", "ts", "pid", "tid", "id"},
    "e": {"name", "cat", "ph", "ts", "pid", "tid", "id"},
    "M": {"name", "ph", "pid", "tid", "args"},
}


def validate(trace):
    """Checks `trace` against the Trace Event Format: required fields and
    types per phase, complete events that nest on each thread, async pairs
    that match, and a name for every thread used. Returns the events by
    phase."""
    assert isinstance(trace["traceEvents"], list)
    by_phase = defaultdict(list)
    for e in trace["traceEvents"]:
        assert e["ph"] in REQUIRED, e
        assert REQUIRED[e["ph"]] <= set(e), e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if "ts" in e:
            assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
        by_phase[e["ph"]].append(e)
    # A thread runs one call at a time: its slices never overlap.
    per_thread = defaultdict(list)
    for e in by_phase["X"]:
        assert e["dur"] >= 0
        per_thread[e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
    for spans in per_thread.values():
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:]):
            assert start >= end - 1e-3, spans  # ts are rounded to ns
    begins = {(e["cat"], e["id"]): e for e in by_phase["b"]}
    ends = {(e["cat"], e["id"]): e for e in by_phase["e"]}
    assert begins.keys() == ends.keys()
    for key, b in begins.items():
        assert ends[key]["ts"] >= b["ts"] and ends[key]["name"] == b["name"]
    named = {e["tid"] for e in by_phase["M"] if e["name"] == "thread_name"}
    used = {e["tid"] for phase in ("X", "b", "e") for e in by_phase[phase]}
    assert used <= named, (used, named)
    assert any(e["name"] == "process_name" for e in by_phase["M"])
    return by_phase


def slow(x):
    time.sleep(0.001)
    return x


def test_a_trace_has_one_call_in_n_per_stage_in_the_trace_event_format(tmp_path):
    pipeline = (
        PipelineBuilder()
        .add_source(range(200))
        .pipe(slow, concurrency=4)
        .pipe(lambda x: x, concurrency=2)
        .add_sink(4)
        .build(num_threads=4, trace_every=10)
    )
    with pipeline.auto_stop():
        assert sorted(pipeline) == list(range(200))
    pipeline.write_trace(tmp_path / "trace.json")
    trace = json.loads((tmp_path / "trace.json").read_text())
    events = validate(trace)
    names = defaultdict(int)
    for e in events["X"]:
        names[e["name"]] += 1
    assert dict(names) == {"0:src": 20, "1:slow[4]": 20, "2:<lambda>[2]": 20}
    # Calls of the slow stage last about its sleep.
    slow_calls = [e["dur"] for e in events["X"] if e["name"] == "1:slow[4]"]
    assert min(slow_calls) >= 1000  # microseconds
    assert trace["otherData"] == {"feedline_trace_every": 10, "recorded": 60, "dropped": 0}
    # The stats name the same stages.
    assert {s.name for s in pipeline.stats().stages[:3]} == set(names)


def test_async_calls_are_begin_end_pairs():
    async def op(x):
        await asyncio.sleep(0.001)
        return x

    pipeline = (
        PipelineBuilder().add_source(range(20)).pipe(op, concurrency=4).add_sink(2).build(num_threads=2, trace_every=1)
    )
    with pipeline.auto_stop():
        assert sorted(pipeline) == list(range(20))
    events = validate(json.loads(pipeline.trace_json()))
    assert len(events["b"]) == len(events["e"]) == 20
    assert {e["name"] for e in events["b"]} == {"1:op[4]"}


def test_without_trace_every_nothing_is_recorded():
    pipeline = PipelineBuilder().add_source(range(10)).pipe(lambda x: x).add_sink(1).build(num_threads=1)
    with pipeline.auto_stop():
        list(pipeline)
    trace = json.loads(pipeline.trace_json())
    assert [e["ph"] for e in trace["traceEvents"]] == ["M"]
    assert trace["otherData"]["recorded"] == 0
    with pytest.raises(ValueError, match="trace_every"):
        PipelineBuilder().add_source(range(1)).add_sink(1).build(num_threads=1, trace_every=-1)
