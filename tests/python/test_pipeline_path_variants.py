"""PathVariants: route each item down one of several paths and merge back.

SPDL's semantics (per-item and batched routing, nesting, aggregates inside
paths, epochs, router errors), built from the engine's linear stages (see
python/feedline/pipeline/_variants.py). Orderings are forced with events,
never with sleeps.
"""

import asyncio
import concurrent.futures
import threading

import pytest

from feedline import PipelineFailure
from feedline.io import ops
from feedline.pipeline import PipelineBuilder, TaskHook, build_pipeline
from feedline.pipeline.defs import (
    Aggregate,
    Disaggregate,
    Merge,
    PathVariants,
    PathVariantsConfig,
    Pipe,
    PipelineConfig,
    SinkConfig,
    SourceConfig,
)


def run(builder, num_threads=2, **kwargs):
    p = builder.build(num_threads=num_threads, **kwargs)
    with p.auto_stop():
        return list(p)


def parity(x):
    return x % 2


def test_each_item_takes_the_path_its_router_picks():
    out = run(
        PipelineBuilder()
        .add_source(range(10))
        .path_variants(parity, [[Pipe(lambda x: ("even", x))], [Pipe(lambda x: ("odd", x))]])
        .add_sink(3)
    )
    assert sorted(out) == sorted([("even" if x % 2 == 0 else "odd", x) for x in range(10)])


def test_paths_of_different_lengths_with_aggregate_and_disaggregate():
    out = run(
        PipelineBuilder()
        .add_source(range(12))
        .path_variants(
            lambda x: x % 3,
            [
                [Pipe(lambda x: x * 10)],
                [Pipe(lambda x: -x), Aggregate(2), Pipe(sum)],
                [Aggregate(10), Disaggregate(), Pipe(str)],
            ],
        )
        .add_sink(3)
    )
    assert sorted(x for x in out if isinstance(x, int) and x >= 0 and x % 10 == 0) == [0, 30, 60, 90]
    assert sorted(x for x in out if isinstance(x, int) and x < 0) == [-17, -5]  # -(7+10), -(1+4)
    assert sorted(x for x in out if isinstance(x, str)) == ["11", "2", "5", "8"]
    assert len(out) == 10


def test_items_keep_flowing_around_other_paths():
    # Items of path 1 pass path 0's stage while path 0 holds a call (with a
    # free call slot: an item waits only when every slot of a stage that is
    # not its own is busy; see docs/python.md).
    release = threading.Event()
    passed = []

    def slow(x):
        assert release.wait(10)
        return ("slow", x)

    def fast(x):
        passed.append(x)
        if len(passed) == 3:
            release.set()
        return ("fast", x)

    out = run(
        PipelineBuilder()
        .add_source([0, 1, 3, 5])
        .path_variants(lambda x: 0 if x == 0 else 1, [[Pipe(slow, concurrency=2)], [Pipe(fast)]])
        .add_sink(3),
        num_threads=3,
    )
    assert sorted(out) == [("fast", 1), ("fast", 3), ("fast", 5), ("slow", 0)]


def test_nested_path_variants_also_as_the_first_stage_of_a_path():
    inner = PathVariants(lambda x: 0 if x < 6 else 1, [[Pipe(lambda x: ("small", x))], [Pipe(lambda x: ("big", x))]])
    out = run(
        PipelineBuilder()
        .add_source(range(10))
        .pipe(lambda x: x + 1)
        .path_variants(parity, [[inner, Pipe(lambda t: (*t, "even-path"))], [Pipe(lambda x: ("odd", x))]])
        .pipe(lambda t: t[:2])
        .add_sink(3)
    )
    expected = [("odd", x) for x in range(1, 11) if x % 2] + [
        ("small" if x < 6 else "big", x) for x in range(1, 11) if x % 2 == 0
    ]
    assert sorted(out) == sorted(expected)


def test_async_router_async_op_generator_and_executor_in_paths():
    async def arouter(x):
        await asyncio.sleep(0)
        return x % 3

    async def aop(x):
        await asyncio.sleep(0)
        return ("async", x)

    def gen(x):
        yield ("gen", x)
        yield ("gen2", x)

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        out = run(
            PipelineBuilder()
            .add_source(range(9))
            .path_variants(
                arouter,
                [[Pipe(aop, concurrency=3)], [Pipe(gen)], [Pipe(lambda x: ("pool", x), executor=pool)]],
            )
            .add_sink(3)
        )
    expected = [("async", x) for x in (0, 3, 6)]
    expected += [(k, x) for x in (1, 4, 7) for k in ("gen", "gen2")]
    expected += [("pool", x) for x in (2, 5, 8)]
    assert sorted(out) == sorted(expected)


def test_none_from_a_path_drops_the_item():
    out = run(
        PipelineBuilder()
        .add_source(range(6))
        .path_variants(parity, [[Pipe(lambda x: None)], [Pipe(lambda x: x)]])
        .add_sink(3)
    )
    assert sorted(out) == [1, 3, 5]


def test_input_order_holds_through_the_variants():
    out = run(
        PipelineBuilder()
        .add_source(range(20))
        .path_variants(parity, [[Pipe(lambda x: x, concurrency=4, output_order="input")], [Pipe(lambda x: -x)]])
        .pipe(abs, output_order="input")
        .add_sink(3),
        num_threads=4,
    )
    assert sorted(out) == list(range(20))


def test_router_index_out_of_range_fails_the_pipeline():
    p = PipelineBuilder().add_source(range(5)).path_variants(lambda x: 7, [[Pipe(str)], [Pipe(str)]]).add_sink(3)
    with pytest.raises(PipelineFailure) as info:
        run(p)
    (exc,) = info.value.exceptions
    assert "returned 7; there are 2 paths" in str(exc) or "returned 7; there are 2 paths" in str(exc.__cause__)


def test_router_exception_fails_the_pipeline_even_with_an_unlimited_budget():
    def router(x):
        if x == 3:
            raise KeyError("no route")
        return 0

    p = PipelineBuilder().add_source(range(10)).path_variants(router, [[Pipe(str)]]).add_sink(3)
    with pytest.raises(PipelineFailure):
        run(p, max_failures=-1)


def test_path_failures_are_tolerated_by_default_and_fatal_with_max_failures_zero():
    def fail_on_3(x):
        if x == 3:
            raise ValueError("bad item")
        return x

    builder = PipelineBuilder().add_source(range(8)).path_variants(parity, [[Pipe(str)], [Pipe(fail_on_3)]]).add_sink(3)
    out = run(builder)
    assert sorted(map(str, out)) == ["0", "1", "2", "4", "5", "6", "7"]
    with pytest.raises(PipelineFailure):
        run(builder, max_failures=0)


def test_empty_source():
    assert run(PipelineBuilder().add_source([]).path_variants(parity, [[Pipe(str)], [Pipe(str)]]).add_sink(3)) == []


def test_continuous_source_epochs_do_not_cross_paths():
    # Path 1 batches by 10, so a partial batch is flushed at each epoch end.
    p = (
        PipelineBuilder()
        .add_source(range(6), continuous=True)
        .path_variants(parity, [[Pipe(lambda x: x)], [Aggregate(10), Pipe(tuple)]])
        .add_sink(3)
        .build(num_threads=2)
    )
    with p.auto_stop():
        for _ in range(3):
            assert sorted(p, key=repr) == sorted([0, 2, 4, (1, 3, 5)], key=repr)


def test_merge_source_then_variants():
    a = PipelineConfig(src=SourceConfig(range(3)))
    b = PipelineConfig(src=SourceConfig(range(10, 13)))
    cfg = PipelineConfig(
        src=Merge([a, b]),
        pipes=[PathVariants(lambda x: int(x >= 10), [[Pipe(lambda x: ("a", x))], [Pipe(lambda x: ("b", x))]])],
        sink=SinkConfig(3),
    )
    p = build_pipeline(cfg, num_threads=2)
    with p.auto_stop():
        assert sorted(p) == [("a", 0), ("a", 1), ("a", 2), ("b", 10), ("b", 11), ("b", 12)]


def test_stage_names_and_task_hooks_see_only_their_paths_items():
    seen = {}

    class Record(TaskHook):
        def __init__(self, info):
            self.info = info

        def task_hook(self, input_item=None):
            seen.setdefault(self.info.stage_name, []).append(input_item)
            return _null()

    p = (
        PipelineBuilder()
        .add_source(range(6))
        .path_variants(parity, [[Pipe(str, name="evens")], [Pipe(str, name="odds"), Aggregate(2)]], name="split")
        .add_sink(3)
        .build(num_threads=2, task_hook_factory=lambda info: [Record(info)])
    )
    with p.auto_stop():
        list(p)
    names = [str(i).split(":", 2)[2] for i in p.stage_infos]
    assert names == ["src", "split", "evens", "odds", "aggregate(2)", "split_merge", "sink"]
    assert sorted(seen["evens"]) == [0, 2, 4]
    assert sorted(seen["odds"]) == [1, 3, 5]
    assert sorted(seen["aggregate(2)"]) == ["1", "3", "5"]


class _null:
    async def __aenter__(self):
        return None

    async def __aexit__(self, *exc):
        return False


# -- batched ---------------------------------------------------------------


def test_batched_routes_elements_and_concatenates_in_path_order():
    out = run(
        PipelineBuilder()
        .add_source(range(10))
        .aggregate(4)
        .path_variants(
            lambda batch: [x % 2 for x in batch],
            [[Pipe(lambda xs: [x * 10 for x in xs])], [Pipe(lambda xs: [-x for x in xs])]],
            batched=True,
        )
        .add_sink(3)
    )
    assert sorted(out) == sorted([[0, 20, -1, -3], [40, 60, -5, -7], [80, -9]])


def test_batched_paths_get_empty_lists_and_may_drop_elements():
    calls = []

    def record(xs):
        calls.append(list(xs))
        return xs

    out = run(
        PipelineBuilder()
        .add_source([[1, 2, 3], [4, 5]])
        .path_variants(
            lambda batch: [0] * len(batch),
            [[Pipe(lambda xs: [x for x in xs if x != 2])], [Pipe(record), Pipe(lambda xs: xs)]],
            batched=True,
        )
        .add_sink(3)
    )
    assert sorted(out) == [[1, 3], [4, 5]]
    assert calls == [[], []]  # path 1 got one (empty) list per batch


def test_batched_all_empty_result_is_dropped_and_async_router():
    async def router(batch):
        return [1] * len(batch)

    out = run(
        PipelineBuilder()
        .add_source([[1, 2], [3]])
        .path_variants(router, [[Pipe(lambda xs: xs)], [Pipe(lambda xs: [])]], batched=True)
        .add_sink(3)
    )
    assert out == []


def test_batched_router_must_return_one_index_per_element():
    p = (
        PipelineBuilder()
        .add_source([[1, 2, 3]])
        .path_variants(lambda b: [0], [[Pipe(lambda xs: xs)]], batched=True)
        .add_sink(3)
    )
    with pytest.raises(PipelineFailure) as info:
        run(p)
    assert "1 indices for a batch of 3" in str(info.value.exceptions[0].__cause__ or info.value.exceptions[0])


def test_batched_paths_take_one_list_and_return_one():
    for stage in (Aggregate(2), Disaggregate(), Pipe(lambda xs: (yield xs))):
        with pytest.raises(ValueError, match="one list"):
            PipelineBuilder().add_source([[1]]).path_variants(lambda b: [0], [[stage]], batched=True).add_sink().build(
                num_threads=1
            )


# -- config validation and repr ---------------------------------------------


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((42, [[Pipe(str)]]), TypeError, "router must be callable"),
        ((parity, []), ValueError, "at least one path"),
        ((parity, [[]]), ValueError, "path 0 .* non-empty"),
        ((parity, [[Pipe(str)], [SourceConfig([1])]]), TypeError, "path 1"),
        ((parity, [[SinkConfig(1)]]), TypeError, "path 0"),
    ],
)
def test_invalid_path_variants(args, error, match):
    with pytest.raises(error, match=match):
        PathVariants(*args)


def test_native_op_inside_a_path_is_rejected_at_build():
    with pytest.raises(ValueError, match="native op") as info:
        PipelineBuilder().add_source(["a"]).path_variants(lambda x: 0, [[Pipe(ops.read_file())]]).add_sink().build(
            num_threads=1
        )
    assert any("PipelineConfig:" in n for n in info.value.__notes__)


def test_repr():
    pv = PathVariants(parity, [[Pipe(str)], [Pipe(abs), Aggregate(2)]])
    assert isinstance(pv, PathVariantsConfig)
    text = repr(pv)
    assert text.startswith("PathVariants(path0=[str(concurrency=1")
    assert "path1=[abs(" in text and "aggregate(2)]" in text
    assert "batched=True" in repr(PathVariants(parity, [[Pipe(str)]], batched=True))
    cfg = PipelineBuilder().add_source([1]).path_variants(parity, [[Pipe(str)]]).add_sink().get_config()
    assert "PathVariants(path0=[str(" in repr(cfg)


def test_async_callable_router_and_numpy_indices():
    import numpy as np

    class Router:
        async def __call__(self, x):
            return np.int64(x % 2)

    out = run(
        PipelineBuilder()
        .add_source(range(6))
        .path_variants(Router(), [[Pipe(lambda x: ("a", x))], [Pipe(lambda x: ("b", x))]])
        .add_sink(3)
    )
    assert sorted(out) == [("a", 0), ("a", 2), ("a", 4), ("b", 1), ("b", 3), ("b", 5)]
    with pytest.raises(PipelineFailure):
        run(PipelineBuilder().add_source([1]).path_variants(lambda x: "0", [[Pipe(str)]]).add_sink(3))


def test_path_variants_inside_merged_pipelines_and_a_custom_merge():
    from feedline.pipeline import is_eof

    async def concat(info, input_queues, output_queue):
        for q in input_queues:
            while not is_eof(item := await q.get()):
                await output_queue.put(item)

    def inputs():
        pv = PathVariants(parity, [[Pipe(lambda x: ("e", x))], [Pipe(lambda x: ("o", x))]])
        return [PipelineConfig(src=SourceConfig(range(4)), pipes=[pv]), PipelineConfig(src=SourceConfig(range(10, 12)))]

    for op in (None, concat):
        p = build_pipeline(PipelineConfig(src=Merge(inputs(), op=op), sink=SinkConfig(3)), num_threads=2)
        with p.auto_stop():
            out = list(p)
        assert sorted(out, key=repr) == sorted([("e", 0), ("o", 1), ("e", 2), ("o", 3), 10, 11], key=repr)
        if op is concat:  # the op takes input 0 to its end first
            assert out[-2:] == [10, 11]
