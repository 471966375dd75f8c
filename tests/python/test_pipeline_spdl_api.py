"""The rest of spdl.pipeline's in-process surface: subscriptable generics,
the config module, custom merge ops and their markers, Merge names,
StageInfo on hooks, repeated stop(), builder reprs, and the source locator in
reprs and errors."""

import asyncio
import functools
import itertools
import logging
import math
import os
import subprocess
import sys
import threading
import time

import pytest

import feedline.pipeline as fp
from feedline import PipelineFailure
from feedline.pipeline import (
    Pipeline,
    PipelineBuilder,
    StageInfo,
    TaskHook,
    TaskStatsHook,
    build_pipeline,
    config,
    is_eof,
    is_epoch_end,
)
from feedline.pipeline.defs import (
    AggregateConfig,
    Aggregator,
    DisaggregateConfig,
    Merge,
    MergeConfig,
    PathVariants,
    PathVariantsConfig,
    Pipe,
    PipeConfig,
    PipelineConfig,
    SinkConfig,
    SourceConfig,
)


def double(x):
    return 2 * x


# -- generics ------------------------------------------------------------------


def test_spdl_generics_are_subscriptable():
    for cls, params in [
        (Pipeline, int),
        (PipelineBuilder, (int, str)),
        (PipelineConfig, int),
        (PipelineConfig, (int, str)),  # an older SPDL arity
        (SourceConfig, int),
        (PipeConfig, (int, str)),
        (AggregateConfig, int),
        (DisaggregateConfig, int),
        (SinkConfig, int),
        (MergeConfig, int),
        (PathVariantsConfig, int),
        (Aggregator, (int, list)),
    ]:
        alias = cls[params]
        assert alias.__origin__ is cls

    # A module annotated the SPDL way imports and runs.
    ns = {}
    exec(
        "from feedline.pipeline import Pipeline, PipelineBuilder\n"
        "from feedline.pipeline.defs import PipelineConfig, SourceConfig\n"
        "def make(cfg: PipelineConfig[int]) -> Pipeline[int]: ...\n"
        "b: PipelineBuilder[int, str] = PipelineBuilder[int, str]()\n"
        "s = SourceConfig[int]([1])\n",
        ns,
    )
    assert isinstance(ns["b"], PipelineBuilder) and isinstance(ns["s"], SourceConfig)


# -- config ------------------------------------------------------------------


@pytest.fixture
def restore_config():
    saved = (config.get_default_hook_class(), config.get_default_queue_class(), config.get_default_build_callback())
    yield
    config.set_default_hook_class(saved[0])
    config.set_default_queue_class(saved[1])
    config.set_default_build_callback(saved[2])
    config.set_compact_log(None)


def test_config_defaults_and_setters_are_independent(restore_config):
    assert fp.config is config
    assert config.get_default_hook_class() is TaskStatsHook
    assert config.get_default_queue_class() is None
    assert config.get_default_build_callback() is None

    class H(TaskStatsHook):
        pass

    config.set_default_hook_class(H)
    assert config.get_default_hook_class() is H
    assert config.get_default_queue_class() is None
    config.set_default_hook_class(None)
    assert config.get_default_hook_class() is None
    config.set_default_hook_class()
    assert config.get_default_hook_class() is TaskStatsHook
    with pytest.raises(TypeError):
        config.set_default_hook_class(42)
    with pytest.raises(TypeError):
        config.set_default_build_callback("nope")


def test_default_hook_class_is_made_per_stage_with_its_stage_info(restore_config):
    made = []

    class Recorder(TaskHook):
        def __init__(self, info, interval=-1):
            made.append((info, interval))

        def task_hook(self, input_item=None):
            return _null()

    config.set_default_hook_class(Recorder)
    p = (
        PipelineBuilder()
        .add_source(range(3))
        .pipe(double, concurrency=2)
        .add_sink(3)
        .build(num_threads=2, report_stats_interval=5)
    )
    with p.auto_stop():
        assert sorted(p) == [0, 2, 4]
    assert [str(info).split(":", 1)[1] for info, _ in made] == ["0:src", "1:double[2]", "2:sink"]
    assert all(isinstance(info, StageInfo) and interval == 5 for info, interval in made)

    made.clear()
    config.set_default_hook_class(None)
    p = PipelineBuilder().add_source(range(3)).pipe(double).add_sink(3).build(num_threads=1)
    with p.auto_stop():
        list(p)
    assert made == []


def test_default_queue_class_is_recorded_and_ignored_with_a_warning(restore_config):
    class Q:
        pass

    config.set_default_queue_class(Q)
    assert config.get_default_queue_class() is Q
    with pytest.warns(RuntimeWarning, match="queue_class is ignored"):
        p = PipelineBuilder().add_source([1]).add_sink().build(num_threads=1)
    with p.auto_stop():
        assert list(p) == [1]


def test_spdl_queue_and_task_names_are_exported():
    for name in ("AsyncQueue", "StatsQueue", "create_task", "QueuePerfStats"):
        assert name in fp.__all__ and getattr(fp, name) is not None
    for name in ("is_diagnostic_mode_enabled", "diagnostic_mode_num_sources"):
        assert name in config.__all__ and callable(getattr(config, name))
    assert issubclass(fp.StatsQueue, fp.AsyncQueue) and issubclass(fp.AsyncQueue, asyncio.Queue)


def test_diagnostic_mode_settings_read_the_environment(monkeypatch):
    for name in (
        "FEEDLINE_PIPELINE_DIAGNOSTIC_MODE",
        "SPDL_PIPELINE_DIAGNOSTIC_MODE",
        "FEEDLINE_PIPELINE_DIAGNOSTIC_MODE_NUM_ITEMS",
        "SPDL_PIPELINE_DIAGNOSTIC_MODE_NUM_ITEMS",
    ):
        monkeypatch.delenv(name, raising=False)
    assert config.is_diagnostic_mode_enabled() is False
    assert config.diagnostic_mode_num_sources() == 1000
    monkeypatch.setenv("SPDL_PIPELINE_DIAGNOSTIC_MODE", "1")
    monkeypatch.setenv("SPDL_PIPELINE_DIAGNOSTIC_MODE_NUM_ITEMS", "7")
    assert config.is_diagnostic_mode_enabled() is True
    assert config.diagnostic_mode_num_sources() == 7
    monkeypatch.setenv("FEEDLINE_PIPELINE_DIAGNOSTIC_MODE_NUM_ITEMS", "12")  # feedline's name wins
    assert config.diagnostic_mode_num_sources() == 12
    monkeypatch.setenv("SPDL_PIPELINE_DIAGNOSTIC_MODE", "off")
    assert config.is_diagnostic_mode_enabled() is False


def test_create_task_logs_failures_cancellations_and_suppresses_repeats(caplog):
    async def fail(i):
        raise ValueError(f"bad {i}")

    async def forever():
        await asyncio.Event().wait()

    async def main():
        assert await fp.create_task(asyncio.sleep(0, result=3), name="ok") == 3
        with pytest.raises(ValueError, match="bad 0"):
            await fp.create_task(fail(0), name="once")
        tasks = [
            fp.create_task(
                fail(i), suppress_repeated_logs=True, suppression_threshold=2, suppression_warning_interval=3
            )
            for i in range(9)
        ]
        await asyncio.gather(*tasks, return_exceptions=True)
        for log_cancelled in (True, False):
            t = fp.create_task(forever(), name=f"cancelled-{log_cancelled}", log_cancelled=log_cancelled)
            await asyncio.sleep(0)
            t.cancel()
            await asyncio.gather(t, return_exceptions=True)

    with caplog.at_level(logging.INFO, logger="feedline.pipeline"):
        asyncio.run(main())
    records = [r for r in caplog.records if r.name == "feedline.pipeline"]
    errors = [r for r in records if r.levelno == logging.ERROR]
    # "once" and the first of the repeated ones, each with its traceback.
    assert [r.getMessage() for r in errors][0] == "Task [once] failed."
    assert len(errors) == 2 and all(r.exc_info and r.exc_info[0] is ValueError for r in errors)
    warnings_ = [r.getMessage() for r in records if r.levelno == logging.WARNING]
    assert sum("not logging further failures there" in m for m in warnings_) == 1
    assert [m.split()[0] for m in warnings_ if "have failed at" in m] == ["3", "6", "9"]
    assert "Task [cancelled-True] was cancelled." in warnings_
    assert not any("cancelled-False" in m for m in warnings_)


def test_async_queue_is_an_asyncio_queue_with_a_stage_hook():
    info = StageInfo(0, 1, "decode")

    async def main():
        q = fp.AsyncQueue(info, buffer_size=2)
        assert q.info is info and q.maxsize == 2
        async with q.stage_hook():
            await q.put(1)
            await q.put(2)
            assert q.full()
            assert [await q.get(), await q.get()] == [1, 2]

    asyncio.run(main())


def test_stats_queue_used_directly_reports_its_laps_and_logs_its_totals(caplog):
    reports = []

    class Q(fp.StatsQueue):
        async def interval_stats_callback(self, stats):
            await super().interval_stats_callback(stats)
            reports.append(stats)
            self.reported.set()

    async def main():
        q = Q(StageInfo(0, 1, "decode"), buffer_size=10, interval=0.01)
        q.reported = asyncio.Event()
        async with q.stage_hook():
            for i in range(5):  # never waits: no report can come in between
                await q.put(i)
            assert [await q.get() for _ in range(5)] == list(range(5))
            await asyncio.wait_for(q.reported.wait(), 30)
            assert reports[0].num_items == 5
            q.reported.clear()
            for i in range(3):
                q.put_nowait(i)
                q.get_nowait()
            await asyncio.wait_for(q.reported.wait(), 30)

    with caplog.at_level(logging.INFO, logger="feedline.pipeline"):
        asyncio.run(main())
    assert isinstance(reports[0], fp.QueuePerfStats)
    assert sum(r.num_items for r in reports) == 8
    first = reports[0]
    assert first.ave_put_time >= 0 and first.ave_get_time >= 0 and 0 <= first.occupancy_rate <= 1
    assert all(math.isnan(v) for v in (first.p90_put_time, first.p99_get_time))
    final = [r.getMessage() for r in caplog.records if r.getMessage().startswith("[0:1:decode_queue]")]
    assert "Processed     8 items" in final[-1] and "Occupancy rate:" in final[-1]


def recording_queue_class():
    """A StatsQueue subclass that records its reports and the instances made."""

    class RecordingQueue(fp.StatsQueue):
        made: list = []

        def __init__(self, info, *, buffer_size=1, interval=-1):
            super().__init__(info, buffer_size=buffer_size, interval=interval)
            self.reports = []
            self.reported = None
            RecordingQueue.made.append(self)

        def interval_stats_callback(self, stats):
            self.reports.append(stats)
            if stats.num_items and self.reported is not None:
                self.reported.set()

    return RecordingQueue


def gated(n, first, gate):
    for i in range(n):
        if i == first:
            assert gate.wait(30)
        yield i


def test_a_stats_queue_class_is_fed_the_native_queues_counters(recwarn):
    recording_queue = recording_queue_class()
    reported = threading.Event()

    def make(info, *, buffer_size=1):
        q = recording_queue(info, buffer_size=buffer_size, interval=0.01)
        q.reported = reported
        return q

    p = (
        PipelineBuilder()
        .add_source(gated(40, 20, reported))
        .pipe(double, name="d")
        .add_sink(5)
        .build(num_threads=2, queue_class=make)
    )
    with p.auto_stop():
        assert len(list(p)) == 40
    assert not [w for w in recwarn if "queue_class" in str(w.message)]
    queues = {q.info.stage_name: q for q in recording_queue.made}
    # Named after the stage that fills them; the consumer's queue is the sink's.
    assert sorted(queues) == ["sink", "src"]
    assert queues["sink"].maxsize == 5 and queues["src"].maxsize == 2
    for q in queues.values():
        assert sum(r.num_items for r in q.reports) == 40  # laps, then the rest at the end
        assert all(isinstance(r, fp.QueuePerfStats) and r.capacity > 0 for r in q.reports)
    # A report came mid-run (the source waited for it).
    assert len([r for r in queues["src"].reports if r.num_items]) >= 2


def test_default_stats_queue_class_gets_report_stats_interval(restore_config):
    recording_queue = recording_queue_class()
    config.set_default_queue_class(recording_queue)
    p = PipelineBuilder().add_source(range(10)).pipe(double).add_sink(3).build(num_threads=1, report_stats_interval=7)
    with p.auto_stop():
        assert len(list(p)) == 10
    assert [q.interval for q in recording_queue.made] == [7, 7]
    # Only the final report (an interval of 7 s is not due in this short run).
    assert all([r.num_items for r in q.reports] == [10] for q in recording_queue.made)


def test_build_callback_sees_every_config_and_its_errors_are_logged(restore_config, caplog):
    seen = []
    config.set_default_build_callback(seen.append)
    builder = PipelineBuilder().add_source([1]).pipe(double).add_sink()
    builder.build(num_threads=1).stop()
    assert len(seen) == 1 and isinstance(seen[0], PipelineConfig)
    assert "double(concurrency=1" in repr(seen[0])

    def broken(cfg):
        raise RuntimeError("telemetry down")

    config.set_default_build_callback(broken)
    with caplog.at_level(logging.ERROR, logger="feedline.pipeline"):
        p = builder.build(num_threads=1)
    with p.auto_stop():
        assert list(p) == [2]
    assert any("build callback failed" in r.getMessage() for r in caplog.records)
    config.set_default_build_callback(None)
    assert config.get_default_build_callback() is None


def test_compact_log_setting_and_environment(restore_config, monkeypatch):
    monkeypatch.delenv("FEEDLINE_PIPELINE_COMPACT_LOG", raising=False)
    monkeypatch.setenv("SPDL_PIPELINE_COMPACT_LOG", "on")
    config.set_compact_log(None)
    assert config.is_compact_log_enabled() is True
    monkeypatch.setenv("SPDL_PIPELINE_COMPACT_LOG", "0")
    assert config.is_compact_log_enabled() is True  # read once, cached
    config.set_compact_log(None)
    assert config.is_compact_log_enabled() is False
    monkeypatch.setenv("FEEDLINE_PIPELINE_COMPACT_LOG", "yes")  # feedline's name wins
    config.set_compact_log(None)
    assert config.is_compact_log_enabled() is True
    config.set_compact_log(False)
    assert config.is_compact_log_enabled() is False
    monkeypatch.setenv("FEEDLINE_PIPELINE_COMPACT_LOG", "maybe")
    config.set_compact_log(None)
    with pytest.warns(UserWarning, match="not a boolean"):
        assert config.is_compact_log_enabled() is False


# -- custom merge ops ---------------------------------------------------------


class _null:
    async def __aenter__(self):
        return None

    async def __aexit__(self, *exc):
        return False


async def round_robin(info, input_queues, output_queue):
    """Takes one item from each input in turn; returns at the first EOF."""
    while True:
        for q in input_queues:
            item = await q.get()
            if is_eof(item):
                return
            await output_queue.put(item)


def _merged(op, *sources, name="merge", pipes=(), continuous=False):
    inputs = [PipelineConfig(src=SourceConfig(s, continuous=continuous)) for s in sources]
    return PipelineConfig(src=Merge(inputs, op=op, name=name), pipes=list(pipes), sink=SinkConfig(10))


def test_custom_merge_op_round_robin_returning_early():
    p = build_pipeline(_merged(round_robin, [1, 2, 3], range(4, 10)), num_threads=2)
    with p.auto_stop():
        assert list(p) == [1, 4, 2, 5, 3, 6]


def _read_all(p, timeout=30):
    out = []
    while True:
        try:
            out.append(p.get_item(timeout=timeout))
        except EOFError:
            return out


def test_custom_merge_op_returning_early_ends_endless_inputs():
    # Each input's EOF comes when that input ends; the op returns then, and
    # the endless input's source stops.
    p = build_pipeline(_merged(round_robin, itertools.count(100), range(3)), num_threads=2)
    with p.auto_stop():
        assert _read_all(p) == [100, 0, 101, 1, 102, 2, 103]


def test_custom_merge_op_early_return_in_each_epoch():
    p = build_pipeline(_merged(round_robin, range(100, 1000), range(2), continuous=True), num_threads=2)
    with p.auto_stop():
        for _ in range(3):
            assert list(p.get_iterator(timeout=30)) == [100, 0, 101, 1, 102]


def test_custom_merge_op_gets_its_stage_info_and_every_item():
    infos = []

    async def collect(info, input_queues, output_queue):
        infos.append(info)
        for q in input_queues:
            while not is_eof(item := await q.get()):
                await output_queue.put((input_queues.index(q), item))

    p = build_pipeline(_merged(collect, range(3), "ab", name="zip2", pipes=[Pipe(list)]), num_threads=2)
    with p.auto_stop():
        out = list(p)
    assert out == [[0, 0], [0, 1], [0, 2], [1, "a"], [1, "b"]]
    (info,) = infos
    assert isinstance(info, StageInfo) and info.stage_name == "zip2_op"
    assert str(info) in [str(i) for i in p.stage_infos]


def test_custom_merge_op_error_fails_the_pipeline():
    async def broken(info, input_queues, output_queue):
        await output_queue.put("first")
        raise LookupError("merge broke")

    p = build_pipeline(_merged(broken, [1, 2]), num_threads=2)
    with pytest.raises(PipelineFailure) as failure, p.auto_stop():
        list(p)
    text = repr(failure.value.exceptions)
    assert "merge broke" in text


def test_custom_merge_op_runs_once_per_epoch_of_a_continuous_source():
    starts = []

    async def passthrough(info, input_queues, output_queue):
        starts.append(info)
        for q in input_queues:
            while not is_eof(item := await q.get()):
                await output_queue.put(item)

    p = build_pipeline(_merged(passthrough, [1, 2], [3], continuous=True), num_threads=2)
    with p.auto_stop():
        for epoch in range(3):
            assert sorted(p) == [1, 2, 3]
            assert len(starts) >= epoch + 1  # (later epochs may have begun)


def test_markers():
    from feedline.pipeline._merge import EOF, EPOCH_END

    assert is_eof(EOF) and not is_eof(None) and not is_eof(EPOCH_END)
    assert is_epoch_end(EPOCH_END) and not is_epoch_end(EOF) and not is_epoch_end(0)


def test_merge_name_in_repr_and_stats():
    a = PipelineConfig(src=SourceConfig([1]))
    b = PipelineConfig(src=SourceConfig([2]))
    cfg = PipelineConfig(src=Merge([a, b], name="mix"), sink=SinkConfig(3))
    assert repr(cfg.src).startswith("Merge(name='mix',")
    assert repr(Merge([a, b])).startswith("Merge(\n")
    assert "op=" in repr(Merge([a, b], op=round_robin))
    p = build_pipeline(cfg, num_threads=1)
    with p.auto_stop():
        assert sorted(p) == [1, 2]
    assert "mix" in [s.name.split(":", 1)[1] for s in p.stats().stages]
    assert "mix" in [i.stage_name for i in p.stage_infos]
    with pytest.raises(ValueError, match="name"):
        Merge([a], name="")


# -- stop, builder repr ---------------------------------------------------------


def test_stop_more_than_once_never_raises():
    p = PipelineBuilder().add_source([1]).add_sink().build(num_threads=1)
    p.stop()
    p.stop()  # never started, stopped twice
    p = PipelineBuilder().add_source(range(3)).add_sink().build(num_threads=1)
    with p.auto_stop():
        assert list(p) == [0, 1, 2]
    p.stop()
    p.stop(timeout=1)

    def bad(x):
        raise ValueError("bad")

    p = PipelineBuilder().add_source(range(3)).pipe(bad, max_failures=0).add_sink().build(num_threads=1)
    with pytest.raises(PipelineFailure):
        list(p)
    p.stop()  # the consumer has the failure: no error now or later
    p.stop()


def test_builder_repr_and_str_without_source_or_sink():
    b = PipelineBuilder().pipe(double, concurrency=3).aggregate(2)
    text = str(b)
    assert text == repr(b)
    assert "Source: (not set)" in text and "Sink: (not set)" in text
    assert "double(concurrency=3" in text and "aggregate(2)" in text
    assert "Source: SourceConfig(" in repr(PipelineBuilder().add_source([1]))
    with pytest.raises(RuntimeError, match="Source is not set"):
        b.get_config()


# -- source locator -----------------------------------------------------------


def _gen():
    yield 1


class _Dataset:
    def __iter__(self):
        return iter([1])


def test_source_reprs_locate_without_printing_data():
    here = os.path.abspath(__file__)
    g = repr(SourceConfig(_gen()))
    assert g.startswith("SourceConfig(source=<generator _gen at ") and f"{here}:" in g
    d = repr(SourceConfig(_Dataset()))
    assert d.startswith("SourceConfig(source=<_Dataset at ") and f"{here}:" in d
    big = repr(SourceConfig(list(range(100000))))
    assert big.startswith("SourceConfig(source=<list object at 0x") and len(big) < 80


def test_pipe_repr_locates_functions_callables_and_partials():
    here = os.path.abspath(__file__)
    assert f"op={__name__}.double at {here}:" in repr(Pipe(double))

    class Op:
        def __call__(self, x):
            return x

    assert "Op at " in repr(Pipe(Op()))
    assert "op=partial(pow, 2, 3)" in repr(Pipe(functools.partial(functools.partial(pow, 2), 3)))
    text = repr(Pipe(functools.partial(sorted, key=abs)))
    assert "op=partial(sorted, key=<built-in function abs>)" in text
    assert f"op=partial({__name__}.double at {here}:" in repr(Pipe(functools.partial(double)))


def test_build_errors_note_the_config_and_where_each_stage_was_defined():
    line = sys._getframe().f_lineno + 1
    pv = PathVariants(lambda x: 0, [[Pipe(str), Pipe(_native_op())]])
    with pytest.raises(ValueError, match="native op") as info:
        build_pipeline(
            PipelineConfig(src=SourceConfig(["x"]), pipes=[Pipe(double), pv], sink=SinkConfig(1)), num_threads=1
        )
    note = "\n".join(info.value.__notes__)
    assert note.startswith("PipelineConfig:")
    assert "PathVariants(path0=[str(concurrency=1" in note
    assert f"(defined at {__file__}:{line})" in note
    assert "path0:" in note and "- read_file" in note


def _native_op():
    from feedline.io import ops

    return ops.read_file()


def test_stage_failures_say_where_the_stage_was_defined():
    def bad(x):
        raise ValueError("bad item")

    line = sys._getframe().f_lineno + 1
    p = PipelineBuilder().add_source(range(3)).pipe(bad, max_failures=0).add_sink().build(num_threads=1)
    with pytest.raises(PipelineFailure) as info, p.auto_stop():
        list(p)
    (exc,) = info.value.exceptions
    assert f"Stage defined at {__file__}:{line}" in exc.__notes__
    assert exc.__notes__.index(f"Stage defined at {__file__}:{line}") == 1 + next(
        i for i, n in enumerate(exc.__notes__) if n.startswith("Pipeline stage: ")
    )


def test_a_failure_raised_by_stop_is_located_too():
    def bad(x):
        raise ValueError("bad item")

    p = PipelineBuilder().add_source(range(3)).pipe(bad, max_failures=0).add_sink().build(num_threads=1)
    p.start()
    # Wait for the stage to have failed without reading the failure (a
    # condition, polled with a bound).
    deadline = time.monotonic() + 30
    while not p.stats().stages[1].finished:
        assert time.monotonic() < deadline
    with pytest.raises(PipelineFailure) as info:
        p.stop()
    assert any(n.startswith("Stage defined at ") for n in info.value.exceptions[0].__notes__)


def test_spdl_style_module_imports(tmp_path):
    # A module that annotates with SPDL's generics and uses is_eof at import.
    mod = tmp_path / "spdl_style.py"
    mod.write_text(
        "from feedline.pipeline import Pipeline, PipelineBuilder, is_eof, is_epoch_end\n"
        "from feedline.pipeline.config import set_default_hook_class\n"
        "from feedline.pipeline.defs import PipelineConfig, PathVariants, Merge\n"
        "def build(cfg: PipelineConfig[int]) -> Pipeline[int]: ...\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, str(mod)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"


def test_async_merge_helpers_run_on_the_pipeline_loop():
    loops = []

    async def op(info, input_queues, output_queue):
        loops.append(asyncio.get_running_loop())
        for q in input_queues:
            while not is_eof(item := await q.get()):
                await output_queue.put(item)

    p = build_pipeline(_merged(op, [1]), num_threads=1)
    with p.auto_stop():
        assert list(p) == [1]
    assert len(loops) == 1


def test_every_config_records_the_line_that_made_it():
    here = sys._getframe().f_lineno
    configs = [
        SourceConfig([1]),  # here + 2
        PipelineBuilder().add_source([1]).pipe(double).aggregate(2).disaggregate().add_sink().get_config(),  # here + 3
        Merge([PipelineConfig(src=SourceConfig([1]))]),  # here + 4
        MergeConfig([PipelineConfig(src=SourceConfig([1]))]),  # here + 5
        PathVariants(lambda x: 0, [[Pipe(str)]]),  # here + 6
    ]
    src, cfg, merge, merge_cfg, pv = configs
    assert src.defined_at == f"{__file__}:{here + 2}"
    assert cfg.src.defined_at == f"{__file__}:{here + 3}"
    assert [p.defined_at for p in cfg.pipes] == [f"{__file__}:{here + 3}"] * 3
    assert merge.defined_at == f"{__file__}:{here + 4}"
    assert merge_cfg.defined_at == f"{__file__}:{here + 5}"
    assert pv.defined_at == pv.paths[0][0].defined_at == f"{__file__}:{here + 6}"


def test_cache_iterator_is_importable_from_pipeline_as_in_spdl():
    from feedline.dataloader import cache_iterator as from_dataloader
    from feedline.pipeline import cache_iterator

    assert cache_iterator is from_dataloader
    assert list(cache_iterator(range(10), 3, stop_after=5)) == [0, 1, 2, 0, 1]
