"""Statistics in feedline.pipeline: snapshots, TaskStatsHook, interval
reports, JSON lines, logging, and custom task hooks."""

import asyncio
import contextlib
import dataclasses
import json
import logging
import math
import re
import threading

import pytest

from feedline.pipeline import (
    JsonLinesWriter,
    PipelineBuilder,
    PipelineStats,
    QueuePerfStats,
    StageInfo,
    TaskHook,
    TaskPerfStats,
    TaskStatsHook,
)
from feedline.pipeline._hooks import queue_stats


def test_snapshot_counts_every_stage():
    def odd_only(x):
        if x % 2 == 0:
            return None
        return x

    p = (
        PipelineBuilder()
        .add_source(range(100))
        .pipe(odd_only, concurrency=2, name="odd")
        .aggregate(10)
        .add_sink(3)
        .build(num_threads=2)
    )
    with p.auto_stop():
        assert sum(len(b) for b in p) == 50
    s = p.stats()
    assert isinstance(s, PipelineStats)
    assert [st.name for st in s.stages] == ["0:src", "1:odd[2]", "2:aggregate(10)", "3:sink"]
    src, odd, agg, sink = s.stages
    assert src.items_out == 100 and odd.items_in == 100 and odd.items_out == 50 and odd.items_skipped == 50
    assert odd.calls == 100 and odd.op_time.count == 100 and odd.op_time.quantile(0.5) > 0
    assert agg.items_out == 5 and s.items_delivered == 5
    assert all(st.finished for st in s.stages)
    assert json.loads(s.to_json())["items_delivered"] == 5
    assert "1:odd[2]" in s.format_table()


class RecordingHook(TaskStatsHook):
    def __init__(self, info, interval, reports):
        super().__init__(info, interval)
        self.reports = reports

    def interval_stats_callback(self, stats):
        self.reports.append((str(self.info), stats))


def test_task_stats_hook_gets_the_stage_totals_at_the_end():
    reports = []

    def factory(info):
        return [RecordingHook(info, -1, reports)]

    def fail_sometimes(x):
        if x % 10 == 0:
            raise ValueError(x)
        return x

    p = (
        PipelineBuilder()
        .add_source(range(100))
        .pipe(fail_sometimes, concurrency=2)
        .add_sink(3)
        .build(num_threads=2, task_hook_factory=factory, stage_id=5)
    )
    with p.auto_stop():
        assert len(list(p)) == 90
    by_stage = dict(reports)
    pid = p.stage_infos[0].pipeline_id
    stats = by_stage[f"{pid}:6:fail_sometimes[2]"]
    assert isinstance(stats, TaskPerfStats)
    assert (stats.num_tasks, stats.num_failures) == (100, 10)
    assert 0 < stats.p50_time <= stats.p90_time <= stats.p99_time


def gated_source(n, first, gate):
    """Yields `first` items, waits for `gate`, then yields the rest."""
    for i in range(n):
        if i == first:
            assert gate.wait(30)
        yield i


def _gated_ident(event, **build_kwargs):
    """40 items through a stage named "ident", the source waiting for
    ``event`` after 20 of them; 2 threads."""
    builder = PipelineBuilder().add_source(gated_source(40, 20, event))
    return builder.pipe(lambda x: x, name="ident").add_sink(50).build(num_threads=2, **build_kwargs)


def test_interval_reports_arrive_while_the_pipeline_runs():
    reports = []
    reported = threading.Event()

    class Hook(TaskStatsHook):
        def interval_stats_callback(self, stats):
            reports.append(stats)
            if stats.num_tasks > 0:
                reported.set()

    p = _gated_ident(
        reported,
        report_stats_interval=0.01,
        task_hook_factory=lambda info: [Hook(info, 0.01)] if info.stage_name == "ident" else [],
    )
    with p.auto_stop():
        assert len(list(p)) == 40
    # Laps add up to the total: interval stats are differences, not totals.
    assert sum(r.num_tasks for r in reports) == 40
    # At least one report came mid-run (the source waited for it), and the
    # final one brought the rest.
    assert len([r for r in reports if r.num_tasks]) >= 2


class LapHook(TaskStatsHook):
    """Records its reports; sets ``reported`` once one of them counts calls."""

    def __init__(self, info, interval, reported=None):
        super().__init__(info, interval)
        self.reports = []
        self.reported = reported

    def interval_stats_callback(self, stats):
        self.reports.append(stats.num_tasks)
        if stats.num_tasks and self.reported is not None:
            self.reported.set()


def test_each_hook_reports_at_its_own_interval_without_report_stats_interval(caplog):
    # As in SPDL: report_stats_interval is for the logger, stats_callback and
    # the default hooks; a hook from task_hook_factory keeps its own interval.
    caplog.set_level(logging.INFO, logger="feedline.pipeline")
    reported = threading.Event()
    snapshots = []
    hooks = {}

    def factory(info):
        if info.stage_name != "ident":
            return []
        hooks["fast"] = LapHook(info, 0.01, reported)
        hooks["slow"] = LapHook(info, 3600)
        return [hooks["fast"], hooks["slow"]]

    p = _gated_ident(reported, task_hook_factory=factory, stats_callback=snapshots.append)
    with p.auto_stop():
        assert len(list(p)) == 40
    fast, slow = hooks["fast"].reports, hooks["slow"].reports
    # The fast hook reported mid-run (the source waited for it) and its laps
    # add up to the stage's calls; the slow one only got the final report.
    assert len([n for n in fast if n]) >= 2 and sum(fast) == 40
    assert slow == [40]
    # Without report_stats_interval, the logger and stats_callback only get
    # the end, however often the hooks report.
    assert len(snapshots) == 1 and all(s.finished for s in snapshots[0].stages)
    laps = [r.getMessage() for r in caplog.records if r.name == "feedline.pipeline" and ": last " in r.getMessage()]
    assert laps == []


def test_a_hooks_long_interval_is_not_shortened_by_report_stats_interval():
    mid_run = threading.Event()
    snapshots = []
    hooks = []

    def record(stats):
        snapshots.append(stats)
        if len([s for s in snapshots if not all(st.finished for st in s.stages)]) >= 2:
            mid_run.set()

    def factory(info):
        if info.stage_name != "ident":
            return []
        hooks.append(LapHook(info, 3600))
        return hooks[-1:]

    p = _gated_ident(mid_run, report_stats_interval=0.01, task_hook_factory=factory, stats_callback=record)
    with p.auto_stop():
        assert len(list(p)) == 40
    # Two periodic reports went to stats_callback before the source went on;
    # the hook, due only after an hour, got just the final report.
    assert len(snapshots) >= 3
    assert hooks[0].reports == [40]


class AsyncHook(TaskStatsHook):
    """Written for SPDL, whose interval_stats_callback is a coroutine function."""

    def __init__(self, info, interval, reports, reported=None):
        super().__init__(info, interval)
        self.reports = reports
        self.reported = reported

    async def interval_stats_callback(self, stats):
        await super().interval_stats_callback(stats)  # logs, as SPDL's does
        await asyncio.sleep(0)  # suspends: needs a real event loop
        self.reports.append(stats)
        if stats.num_tasks > 0 and self.reported is not None:
            self.reported.set()


def test_async_interval_stats_callbacks_are_awaited(caplog):
    caplog.set_level(logging.INFO, logger="feedline")
    reports = []
    reported = threading.Event()
    p = _gated_ident(
        reported,
        report_stats_interval=0.01,
        task_hook_factory=lambda info: [AsyncHook(info, 0.01, reports, reported)] if info.stage_name == "ident" else [],
    )
    with p.auto_stop():
        assert len(list(p)) == 40
    assert sum(r.num_tasks for r in reports) == 40
    assert len([r for r in reports if r.num_tasks]) >= 2  # one mid-run, one final
    # super()'s coroutine ran too: TaskStatsHook's own line per report.
    lines = [r.getMessage() for r in caplog.records if "]\tCompleted" in r.getMessage()]
    assert len(lines) == len(reports)


def test_async_hook_gets_the_final_report_when_stopped_from_a_coroutine():
    # stop() inside a running event loop: the final report cannot start a
    # second loop on that thread, and must still reach the hook.
    reports = []
    p = (
        PipelineBuilder()
        .add_source(range(10))
        .pipe(lambda x: x, name="ident")
        .add_sink(20)
        .build(
            num_threads=1,
            task_hook_factory=lambda info: [AsyncHook(info, -1, reports)] if info.stage_name == "ident" else [],
        )
    )

    async def main():
        p.start()
        got = [p.get_item(timeout=30) for _ in range(10)]
        p.stop()
        return got

    assert asyncio.run(main()) == list(range(10))
    assert sum(r.num_tasks for r in reports) == 10


def test_json_lines_writer_exports_periodic_and_final_snapshots(tmp_path):
    path = tmp_path / "stats.jsonl"
    writer = JsonLinesWriter(path)
    reported = threading.Event()

    def callback(stats):
        writer(stats)
        if stats.stages[1].calls >= 10:
            reported.set()

    p = (
        PipelineBuilder()
        .add_source(gated_source(30, 10, reported))
        .pipe(lambda x: x)
        .add_sink(50)
        .build(num_threads=2, report_stats_interval=0.01, stats_callback=callback)
    )
    with p.auto_stop():
        assert len(list(p)) == 30
    writer.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(lines) >= 2
    assert lines[-1]["items_delivered"] == 30
    assert [st["name"] for st in lines[-1]["stages"]] == ["0:src", "1:<lambda>", "2:sink"]


def test_reports_go_to_python_logging(caplog):
    caplog.set_level(logging.INFO, logger="feedline")
    reported = threading.Event()

    class Hook(TaskStatsHook):
        def interval_stats_callback(self, stats):
            if stats.num_tasks:
                reported.set()

    p = (
        PipelineBuilder()
        .add_source(gated_source(20, 10, reported))
        .pipe(lambda x: x, name="ident")
        .add_sink(30)
        .build(
            num_threads=2,
            report_stats_interval=0.01,
            task_hook_factory=lambda info: [Hook(info, 0.01)],
        )
    )
    with p.auto_stop():
        assert len(list(p)) == 20
    messages = [r.getMessage() for r in caplog.records if r.name == "feedline.pipeline"]
    assert any("ident" in m and "Completed" in m and "occupancy" in m for m in messages)
    # The Python stage's line says what the GIL cost it; every report ends
    # with the bottleneck so far.
    assert any(re.search(r"\[.*ident.*GIL: waited \d+\.\d{3} ms per call, held \d+%\.", m) for m in messages)
    assert any("\n  bottleneck so far: " in m for m in messages)
    assert messages[-1].startswith("pipeline finished:") and "1:ident" in messages[-1]


def test_failing_stats_callback_is_logged_not_fatal(caplog):
    def broken(stats):
        raise RuntimeError("exporter down")

    p = PipelineBuilder().add_source(range(5)).add_sink(3).build(num_threads=1, stats_callback=broken)
    with p.auto_stop():
        assert list(p) == [0, 1, 2, 3, 4]
    assert any("exporter down" in r.getMessage() or "exporter down" in (r.exc_text or "") for r in caplog.records)


def test_custom_task_hooks_wrap_every_python_call():
    events = []

    class Trace(TaskHook):
        def __init__(self, info):
            self.info = info

        @contextlib.asynccontextmanager
        async def stage_hook(self):
            events.append(("stage-enter", self.info.stage_name))
            yield
            events.append(("stage-exit", self.info.stage_name))

        @contextlib.asynccontextmanager
        async def task_hook(self, input_item=None):
            try:
                yield
                events.append(("ok", input_item))
            except ValueError:
                events.append(("failed", input_item))
                raise

    def op(x):
        if x == 2:
            raise ValueError("two")
        return x

    p = (
        PipelineBuilder()
        .add_source(range(4))
        .pipe(op, name="op")
        .add_sink(3)
        .build(num_threads=1, task_hook_factory=lambda info: [Trace(info)] if info.stage_name == "op" else [])
    )
    with p.auto_stop():
        assert list(p) == [0, 1, 3]
    assert events[0] == ("stage-enter", "op")
    assert events[-1] == ("stage-exit", "op")
    assert sorted(events[1:-1], key=lambda e: e[1]) == [("ok", 0), ("ok", 1), ("failed", 2), ("ok", 3)]


def test_a_hook_that_suppresses_a_generators_error_ends_its_outputs():
    # A hook's task_hook may swallow the op's exception (returning True
    # from __aexit__): the item's outputs end there, without the last one
    # again and without an error of the hook's wrapper.
    class Swallow(TaskHook):
        @contextlib.asynccontextmanager
        async def task_hook(self, input_item=None):
            with contextlib.suppress(ValueError):
                yield

    def late(x):
        yield x
        if x == 1:
            raise ValueError("after one output")
        yield x + 100

    def early(x):
        if x == 1:
            raise ValueError("before any output")
        yield x

    async def agen(x):
        yield x
        if x == 1:
            raise ValueError("after one output")
        yield x + 100

    for op, want in ((late, [0, 1, 2, 100, 102]), (early, [0, 2]), (agen, [0, 1, 2, 100, 102])):
        p = (
            PipelineBuilder()
            .add_source(range(3))
            .pipe(op, name="op")
            .add_sink(3)
            .build(num_threads=1, task_hook_factory=lambda info: [Swallow()] if info.stage_name == "op" else [])
        )
        with p.auto_stop():
            assert sorted(p) == want, op.__name__
        assert p.stats().stages[1].failures == 0, op.__name__


def test_task_hooks_wrap_async_calls_on_the_loop():
    seen = []

    class Trace(TaskHook):
        @contextlib.asynccontextmanager
        async def task_hook(self, input_item=None):
            seen.append(input_item)
            yield

    async def op(x):
        return x

    p = (
        PipelineBuilder()
        .add_source(range(3))
        .pipe(op)
        .add_sink(3)
        .build(num_threads=1, task_hook_factory=lambda info: [Trace()] if info.stage_id == 1 else [])
    )
    with p.auto_stop():
        assert sorted(p) == [0, 1, 2]
    assert sorted(seen) == [0, 1, 2]


def test_stage_info_and_perf_stat_classes():
    assert str(StageInfo(3, 1, "decode", 8)) == "3:1:decode[8]"
    assert str(StageInfo(3, 0, "src")) == "3:0:src"
    q = QueuePerfStats(elapsed=2.0, num_items=10)
    assert q.qps == 5.0
    with pytest.raises(TypeError):
        TaskHook()  # abstract


def test_perf_stats_take_spdls_fields_in_spdls_order():
    # Positional construction as in SPDL code: feedline's extra fields come last.
    t = TaskPerfStats(100, 2, 0.01, 0.02, 0.05)
    assert (t.num_tasks, t.num_failures, t.ave_time, t.p90_time, t.p99_time) == (100, 2, 0.01, 0.02, 0.05)
    spdl_queue_fields = [
        "elapsed",
        "num_items",
        "ave_put_time",
        "ave_get_time",
        "p90_put_time",
        "p99_put_time",
        "p90_get_time",
        "p99_get_time",
        "occupancy_rate",
    ]
    names = [f.name for f in dataclasses.fields(QueuePerfStats)]
    assert names[: len(spdl_queue_fields)] == spdl_queue_fields
    q = QueuePerfStats(2.0, 10, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.75)
    assert (q.p90_put_time, q.p99_get_time, q.occupancy_rate, q.qps) == (0.3, 0.6, 0.75, 5.0)
    names = [f.name for f in dataclasses.fields(TaskPerfStats)]
    assert names[:5] == ["num_tasks", "num_failures", "ave_time", "p90_time", "p99_time"]


def test_queue_stats_of_the_engine_leave_unmeasured_percentiles_nan():
    p = PipelineBuilder().add_source(range(20)).pipe(_square).add_sink(3).build(num_threads=1)
    with p.auto_stop():
        assert len(list(p)) == 20
    q = queue_stats(p.stats().stages[1])
    assert q.num_items == 20
    for value in (q.p90_put_time, q.p99_put_time, q.p90_get_time, q.p99_get_time):
        assert math.isnan(value)
    assert q.ave_put_time >= 0 and q.ave_get_time >= 0


def _square(x):
    return x * x


class _Counting(TaskHook):
    """Counts calls it wraps in this process."""

    calls: list[int] = []

    def __init__(self, info):
        self.info = info

    @contextlib.asynccontextmanager
    async def stage_hook(self):
        yield

    @contextlib.asynccontextmanager
    async def task_hook(self, input_item=None):
        yield
        _Counting.calls.append(input_item)


def test_task_hooks_of_a_process_pool_stage_run_here_around_the_call():
    # The hooks wrapped the op in a closure that was submitted to the
    # executor: a process pool could not pickle it, and every item failed.
    import concurrent.futures
    import multiprocessing

    _Counting.calls = []
    ctx = multiprocessing.get_context("forkserver")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        p = (
            PipelineBuilder()
            .add_source(range(6))
            .pipe(_square, executor=pool, name="square")
            .add_sink(3)
            .build(
                num_threads=1, task_hook_factory=lambda info: [_Counting(info)] if info.stage_name == "square" else []
            )
        )
        with p.auto_stop():
            assert sorted(p) == [0, 1, 4, 9, 16, 25]
    assert sorted(_Counting.calls) == list(range(6))


def test_a_pipeline_whose_start_failed_does_not_run_without_it():
    # A stage hook that raises fails start(); the first read used to start
    # the engine anyway, without the hooks (or the event loop).
    class Broken(TaskHook):
        @contextlib.asynccontextmanager
        async def stage_hook(self):
            raise OSError("the metrics server is down")
            yield

        @contextlib.asynccontextmanager
        async def task_hook(self, input_item=None):
            yield

    p = (
        PipelineBuilder()
        .add_source(range(3))
        .pipe(_square)
        .add_sink(3)
        .build(num_threads=1, task_hook_factory=lambda info: [Broken()])
    )
    with pytest.raises(OSError, match="metrics server"):
        p.start()
    with pytest.raises(RuntimeError, match="failed to start: OSError: the metrics server is down"):
        list(p)
    with pytest.raises(RuntimeError, match="failed to start"):
        p.get_item(timeout=1)
    p.stop()
