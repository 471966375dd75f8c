"""feedline.pipeline: ops, ordering, skipping, batching, epochs and merging.

Every behaviour here is the one spdl.pipeline documents, run on the native
engine. Orderings are forced with events and barriers, never with sleeps.
"""

import asyncio
import concurrent.futures
import threading

import pytest

from feedline.pipeline import PipelineBuilder, build_pipeline
from feedline.pipeline.defs import (
    Aggregate,
    Aggregator,
    Disaggregate,
    Merge,
    Pipe,
    PipelineConfig,
    SinkConfig,
    SourceConfig,
)


def run(builder, num_threads=2, **kwargs):
    p = builder.build(num_threads=num_threads, **kwargs)
    with p.auto_stop():
        return list(p)


def double(x):
    return 2 * x


def test_pipes_apply_in_order():
    out = run(PipelineBuilder().add_source(range(10)).pipe(double).pipe(lambda x: x + 1).add_sink(3))
    assert sorted(out) == [2 * i + 1 for i in range(10)]


def test_no_pipes_passes_items_through():
    items = [object() for _ in range(5)]
    out = run(PipelineBuilder().add_source(items).add_sink(1))
    assert out == items  # the same objects, in order (one stage, one thread)


def test_python_values_are_not_copied():
    src = [{"i": i} for i in range(20)]
    out = run(PipelineBuilder().add_source(src).pipe(lambda d: d, concurrency=3).add_sink(3))
    assert sorted(map(id, out)) == sorted(map(id, src))


def test_none_results_are_skipped():
    out = run(PipelineBuilder().add_source(range(10)).pipe(lambda x: x if x % 3 else None).add_sink(3))
    assert sorted(out) == [1, 2, 4, 5, 7, 8]


def test_completion_order_lets_fast_items_overtake():
    # Item 0 is held until item 1 has come out of the stage.
    one_done = threading.Event()

    def op(x):
        if x == 0:
            assert one_done.wait(10)
        return x

    p = PipelineBuilder().add_source(range(2)).pipe(op, concurrency=2).add_sink(3).build(num_threads=2)
    with p.auto_stop():
        first = p.get_item(timeout=10)
        one_done.set()
        second = p.get_item(timeout=10)
    assert (first, second) == (1, 0)


def test_input_order_keeps_the_order_of_inputs():
    # Item 0 finishes last; the output must still start with it.
    barrier = threading.Event()

    def op(x):
        if x == 0:
            assert barrier.wait(10)
        elif x == 3:
            barrier.set()
        return x

    out = run(
        PipelineBuilder().add_source(range(8)).pipe(op, concurrency=4, output_order="input").add_sink(8),
        num_threads=4,
    )
    assert out == list(range(8))


def test_input_order_skips_none_without_losing_order():
    out = run(
        PipelineBuilder()
        .add_source(range(20))
        .pipe(lambda x: None if x % 4 == 0 else x, concurrency=3, output_order="input")
        .add_sink(3),
        num_threads=3,
    )
    assert out == [x for x in range(20) if x % 4]


def test_generator_op_emits_zero_or_more_items():
    def expand(x):
        yield from [x] * x
        yield None  # skipped

    out = run(PipelineBuilder().add_source(range(4)).pipe(expand).add_sink(3))
    assert sorted(out) == [1, 2, 2, 3, 3, 3]


def test_generator_output_is_incremental():
    # The consumer gets the first output while the generator is still running.
    first_seen = threading.Event()

    def gen(x):
        yield "first"
        assert first_seen.wait(10)
        yield "second"

    p = PipelineBuilder().add_source([0]).pipe(gen).add_sink(1).build(num_threads=1)
    with p.auto_stop():
        assert p.get_item(timeout=10) == "first"
        first_seen.set()
        assert p.get_item(timeout=10) == "second"


async def async_double(x):
    await asyncio.sleep(0)
    return 2 * x


def test_async_op_runs_on_the_pipeline_event_loop():
    threads = set()

    async def op(x):
        threads.add(threading.current_thread().name)
        await asyncio.sleep(0)
        return None if x == 3 else x

    out = run(PipelineBuilder().add_source(range(6)).pipe(op, concurrency=3).pipe(async_double).add_sink(3))
    assert sorted(out) == [0, 2, 4, 8, 10]
    assert len(threads) == 1 and threads.pop().startswith("feedline_asyncio")


def test_async_calls_overlap_up_to_the_concurrency():
    # Three calls must be in flight at once for any of them to finish.
    started = 0
    all_in = asyncio.Event

    state = {}

    async def op(x):
        nonlocal started
        ev = state.setdefault("ev", all_in())
        started += 1
        if started == 3:
            ev.set()
        await asyncio.wait_for(ev.wait(), 10)
        return x

    out = run(PipelineBuilder().add_source(range(3)).pipe(op, concurrency=3).add_sink(3), num_threads=1)
    assert sorted(out) == [0, 1, 2]


def test_no_event_loop_thread_without_async_ops():
    before = {t.name for t in threading.enumerate()}
    p = PipelineBuilder().add_source(range(3)).pipe(double).add_sink(3).build(num_threads=1)
    with p.auto_stop():
        names = {t.name for t in threading.enumerate()} - before
        assert list(p) == [0, 2, 4]
    assert not any(n.startswith("feedline_asyncio") for n in names)


def test_async_generator_op():
    async def agen(x):
        for i in range(x):
            await asyncio.sleep(0)
            yield i

    out = run(PipelineBuilder().add_source([1, 2, 3]).pipe(agen).add_sink(3))
    assert sorted(out) == [0, 0, 0, 1, 1, 2]


def test_async_iterable_source():
    async def numbers():
        for i in range(5):
            await asyncio.sleep(0)
            yield i

    out = run(PipelineBuilder().add_source(numbers()).pipe(double).add_sink(3))
    assert sorted(out) == [0, 2, 4, 6, 8]


def test_sync_op_on_a_user_executor():
    with concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="user_pool") as ex:

        def op(x):
            return (x, threading.current_thread().name)

        out = run(PipelineBuilder().add_source(range(6)).pipe(op, executor=ex, concurrency=2).add_sink(3))
    assert sorted(x for x, _ in out) == list(range(6))
    assert all(name.startswith("user_pool") for _, name in out)


def test_generator_op_on_a_user_executor():
    def gen(x):
        yield x
        yield -x

    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        out = run(PipelineBuilder().add_source([1, 2]).pipe(gen, executor=ex).add_sink(3))
    assert sorted(out) == [-2, -1, 1, 2]


def test_executor_with_async_op_is_rejected():
    with concurrent.futures.ThreadPoolExecutor(1) as ex, pytest.raises(ValueError, match="executor"):
        PipelineBuilder().add_source([1]).pipe(async_double, executor=ex)


def test_containers_are_ops_through_getitem():
    table = {0: "zero", 1: "one"}
    assert run(PipelineBuilder().add_source([1, 0]).pipe(table).add_sink(3), num_threads=1) == ["one", "zero"]
    assert run(PipelineBuilder().add_source([2]).pipe(["a", "b", "c"]).add_sink(3)) == ["c"]


def test_callable_objects_and_default_names():
    class Scale:
        def __call__(self, x):
            return 10 * x

    p = PipelineBuilder().add_source([1]).pipe(Scale()).pipe(double).add_sink(3).build(num_threads=1)
    names = [str(info) for info in p.stage_infos]
    assert names[1].endswith(":1:Scale") and names[2].endswith(":2:double")
    with p.auto_stop():
        assert list(p) == [20]


def test_aggregate_and_drop_last():
    assert run(PipelineBuilder().add_source(range(10)).aggregate(3).add_sink(3), num_threads=1) == [
        [0, 1, 2],
        [3, 4, 5],
        [6, 7, 8],
        [9],
    ]
    assert run(PipelineBuilder().add_source(range(10)).aggregate(3, drop_last=True).add_sink(3), num_threads=1) == [
        [0, 1, 2],
        [3, 4, 5],
        [6, 7, 8],
    ]


def test_custom_aggregator():
    class SumPairs(Aggregator):
        def __init__(self):
            self.buf = []

        def accumulate(self, item):
            self.buf.append(item)
            if len(self.buf) == 2:
                out, self.buf = sum(self.buf), []
                return out
            return None

        def flush(self):
            out, self.buf = self.buf, []
            return sum(out) if out else None

    assert run(PipelineBuilder().add_source(range(5)).aggregate(SumPairs()).add_sink(3), num_threads=1) == [1, 5, 4]
    assert run(
        PipelineBuilder().add_source(range(5)).aggregate(SumPairs(), drop_last=True).add_sink(3), num_threads=1
    ) == [1, 5]


def test_disaggregate_splits_native_and_python_batches():
    out = run(PipelineBuilder().add_source(range(7)).aggregate(3).disaggregate().add_sink(3), num_threads=1)
    assert out == list(range(7))
    out = run(PipelineBuilder().add_source([(1, 2), [3], range(4, 6)]).disaggregate().add_sink(3), num_threads=1)
    assert out == [1, 2, 3, 4, 5]


def test_python_op_receives_native_batches_as_lists():
    out = run(PipelineBuilder().add_source(range(4)).aggregate(2).pipe(lambda b: (type(b), sum(b))).add_sink(3))
    assert sorted(out, key=lambda t: t[1]) == [(list, 1), (list, 5)]


def test_continuous_source_gives_one_epoch_per_iteration():
    p = (
        PipelineBuilder()
        .add_source(range(5), continuous=True)
        .pipe(double, concurrency=2)
        .aggregate(2)
        .add_sink(3)
        .build(num_threads=2)
    )
    with p.auto_stop():
        for _ in range(3):
            epoch = list(p)
            assert sorted(x for batch in epoch for x in batch) == [0, 2, 4, 6, 8]
            # Partial batches never straddle epochs.
            assert sorted(len(b) for b in epoch) == [1, 2, 2]


def test_get_item_raises_eof_at_epoch_end_and_iterators_are_single_use():
    p = PipelineBuilder().add_source([1, 2], continuous=True).add_sink(3).build(num_threads=1)
    with p.auto_stop():
        it = p.get_iterator(timeout=10)
        assert list(it) == [1, 2]
        assert list(it) == []  # ended; the next epoch needs a new iterator
        assert [p.get_item(timeout=10), p.get_item(timeout=10)] == [1, 2]
        with pytest.raises(EOFError):
            p.get_item(timeout=10)
        assert list(p) == [1, 2]


def test_a_new_iterator_continues_where_the_last_stopped():
    p = PipelineBuilder().add_source(range(6)).add_sink(1).build(num_threads=1)
    with p.auto_stop():
        head = []
        for x in p:
            head.append(x)
            if x == 2:
                break
        assert head == [0, 1, 2]
        assert list(p) == [3, 4, 5]
        with pytest.raises(EOFError):
            p.get_item(timeout=10)


def test_build_pipeline_from_defs():
    cfg = PipelineConfig(
        src=SourceConfig(range(6)),
        pipes=[Pipe(double, concurrency=2), Aggregate(4), Disaggregate(), Pipe(lambda x: x + 1)],
        sink=SinkConfig(2),
    )
    p = build_pipeline(cfg, num_threads=2)
    with p.auto_stop():
        assert sorted(p) == [1, 3, 5, 7, 9, 11]


def test_merge_several_pipelines():
    a = PipelineConfig(src=SourceConfig(range(5)), pipes=[Pipe(double)])
    b = PipelineConfig(src=SourceConfig(["x", "y"]), pipes=[])
    cfg = PipelineConfig(src=Merge([a, b]), pipes=[Pipe(lambda v: (v,))], sink=SinkConfig(3))
    p = build_pipeline(cfg, num_threads=2)
    assert [str(i).split(":", 1)[1] for i in p.stage_infos] == [
        "0:src",
        "1:double",
        "2:src",
        "3:merge",
        "4:<lambda>",
        "5:sink",
    ]
    with p.auto_stop():
        out = list(p)
    assert sorted(out, key=repr) == sorted([(0,), (2,), (4,), (6,), (8,), ("x",), ("y",)], key=repr)


def test_merge_of_continuous_sources_keeps_epochs():
    a = PipelineConfig(src=SourceConfig([1, 2], continuous=True))
    b = PipelineConfig(src=SourceConfig([3], continuous=True))
    p = build_pipeline(PipelineConfig(src=Merge([a, b]), sink=SinkConfig(3)), num_threads=2)
    with p.auto_stop():
        for _ in range(3):
            assert sorted(p) == [1, 2, 3]


def test_mixed_continuous_merge_is_rejected():
    a = PipelineConfig(src=SourceConfig([1], continuous=True))
    b = PipelineConfig(src=SourceConfig([2]))
    with pytest.raises(ValueError, match="mixed continuous"):
        build_pipeline(PipelineConfig(src=Merge([a, b]), sink=SinkConfig(3)), num_threads=1)


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda: PipelineBuilder().add_source([1]).add_source([2]), ValueError, "Source already set"),
        (lambda: PipelineBuilder().add_source([1]).add_sink().add_sink(), ValueError, "Sink is already set"),
        (lambda: PipelineBuilder().add_source([1]).pipe(double, concurrency=0), ValueError, "concurrency"),
        (lambda: PipelineBuilder().add_source([1]).pipe(double, output_order="fifo"), ValueError, "output_order"),
        (lambda: PipelineBuilder().add_source(5), ValueError, "iterable"),
        (lambda: PipelineBuilder().add_source([1]).pipe(42), TypeError, "callable"),
        (lambda: PipelineBuilder().add_source([1]).aggregate(0), ValueError, "batch size"),
        (lambda: PipelineBuilder().add_source([1]).add_sink(0), ValueError, "buffer_size"),
        (lambda: PipelineBuilder().add_source([1]).add_sink().build(num_threads=0), ValueError, "num_threads"),
        (lambda: PipelineBuilder().add_sink().build(num_threads=1), RuntimeError, "Source is not set"),
        (lambda: Merge([]), ValueError, "at least one"),
    ],
)
def test_invalid_descriptions_fail_at_build_time(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_config_reprs_do_not_print_data():
    big = list(range(100000))
    cfg = PipelineBuilder().add_source(big).pipe(double, concurrency=4).aggregate(8).add_sink(3).get_config()
    text = repr(cfg)
    assert len(text) < 500
    assert "double(concurrency=4" in text and "aggregate(8)" in text
    assert "SinkConfig(buffer_size=3)" in text
