"""Native ops in Python pipelines: no GIL, no conversion between native
stages, conversion once at the seam, and build-time type checks.

The ops come from _feedline_testing (tests/python/native/), a test-only
extension that hands its ops to feedline through the extension API, as any
third-party native op would.
"""

import pathlib

import _feedline_testing as testing
import pytest

import feedline
from feedline.pipeline import NativeOp, PipelineBuilder, PipelineFailure


def run(builder, num_threads=2, **kwargs):
    p = builder.build(num_threads=num_threads, **kwargs)
    with p.auto_stop():
        return list(p)


def test_native_op_handles_describe_themselves():
    op = testing.add(1)
    assert isinstance(op, NativeOp)
    assert (op.name, op.kind, op.input_type, op.output_type) == ("add", "map", "int", "int")
    assert repr(op) == "NativeOp(add: int -> int)"
    assert testing.identity().input_type is None
    assert testing.repeat(2).kind == "generator"


def test_native_ops_run_without_the_gil():
    out = run(PipelineBuilder().add_source(range(50)).pipe(testing.gil_probe(), concurrency=2).add_sink(3))
    assert out == [False] * 50
    # The control: the same probe, on the same worker threads, reports a GIL
    # that its thread does hold, so the False above is a measurement.
    probe = testing.gil_probe(take_gil=True)
    assert run(PipelineBuilder().add_source(range(50)).pipe(probe, concurrency=2).add_sink(3)) == [True] * 50


def test_native_items_are_not_converted_between_native_stages():
    to_py, from_py = testing.conversion_counts()
    out = run(
        PipelineBuilder()
        .add_source(range(100))
        .pipe(testing.add(1))
        .pipe(testing.add(10), concurrency=2)
        .pipe(testing.identity())
        .pipe(testing.add(100))
        .add_sink(3)
    )
    assert sorted(out) == [x + 111 for x in range(100)]
    to_py2, from_py2 = testing.conversion_counts()
    # Once into native at the first native op, once out at the consumer.
    assert (to_py2 - to_py, from_py2 - from_py) == (100, 100)


def test_python_op_between_native_ops_converts_at_each_seam():
    to_py, from_py = testing.conversion_counts()
    out = run(
        PipelineBuilder()
        .add_source(range(10))
        .pipe(testing.add(1))
        .pipe(lambda x: x * 2)
        .pipe(testing.add(1))
        .add_sink(3)
    )
    assert sorted(out) == [2 * (x + 1) + 1 for x in range(10)]
    to_py2, from_py2 = testing.conversion_counts()
    assert (to_py2 - to_py, from_py2 - from_py) == (20, 20)


def test_native_source_and_native_generator():
    out = run(PipelineBuilder().add_source(testing.range_source(4)).pipe(testing.repeat(2)).add_sink(3))
    assert sorted(out) == [0, 0, 1, 1, 2, 2, 3, 3]


def test_native_batches_reach_python_as_lists():
    out = run(PipelineBuilder().add_source(testing.range_source(5)).aggregate(2).add_sink(3), num_threads=1)
    assert out == [[0, 1], [2, 3], [4]]


def test_mismatched_native_stages_fail_at_build_naming_both():
    b = PipelineBuilder().add_source(range(3)).pipe(testing.to_str(), name="fmt").pipe(testing.add(1), name="inc")
    with pytest.raises(ValueError, match=r"stage 'inc' \(takes int\) cannot follow stage 'fmt' \(produces str\)"):
        b.add_sink(3).build(num_threads=1)


def test_python_values_without_a_converter_fail_at_build_naming_both():
    # Python values reach a native op only through a converter to its input
    # type; there is none to a native batch.
    from feedline.io import ops

    b = PipelineBuilder().add_source(range(3)).pipe(lambda x: [x], name="wrap").pipe(ops.stack(), name="stack")
    with pytest.raises(
        ValueError, match=r"stage 'stack' \(takes list\) cannot follow stage 'wrap' \(produces object\)"
    ):
        b.add_sink(3).build(num_threads=1)
    # A native batch fits.
    PipelineBuilder().add_source(range(3)).aggregate(3).pipe(ops.stack()).add_sink(3).build(num_threads=1)


def test_python_values_that_do_not_convert_are_counted_failures():
    p = PipelineBuilder().add_source([1, "two", 3]).pipe(testing.add(1)).add_sink(3).build(num_threads=1)
    with p.auto_stop():
        assert list(p) == [2, 4]
    assert p.stats().stages[1].failures == 1
    p = (
        PipelineBuilder()
        .add_source(["x"])
        .pipe(testing.add(1), name="inc")
        .add_sink(3)
        .build(num_threads=1, max_failures=0)
    )
    with p.auto_stop(), pytest.raises(PipelineFailure) as info:
        list(p)
    cause = info.value.exceptions[0].__cause__
    assert type(cause) is ValueError
    assert "native int input, got a Python str" in str(cause)


def test_paths_convert_to_native_strings():
    # str and os.PathLike reach a native str op; bytes are a counted failure.
    p = PipelineBuilder().add_source([pathlib.Path("/a/b"), "cd", b"x"]).pipe(testing.str_len()).add_sink(3)
    p = p.build(num_threads=1)
    with p.auto_stop():
        assert list(p) == [4, 2]
    assert p.stats().stages[1].failures == 1


def test_an_op_that_takes_any_item_leaves_python_values_untouched():
    src = [pathlib.Path("/a"), {"k": 1}]
    out = run(PipelineBuilder().add_source(src).pipe(testing.identity()).add_sink(3), num_threads=1)
    assert out[0] is src[0] and out[1] is src[1]


def test_native_failures_carry_the_feedline_error():
    p = (
        PipelineBuilder()
        .add_source(range(1, 10))
        .pipe(testing.fail_on_multiple(3))
        .add_sink(3)
        .build(num_threads=1, max_failures=1)
    )
    with p.auto_stop(), pytest.raises(PipelineFailure) as info:
        list(p)
    cause = info.value.exceptions[0].__cause__
    assert type(cause) is feedline.DecodeError
    assert str(cause) == "value 6 is a multiple of 3"


def test_native_ops_reject_executors_and_task_hooks():
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as ex, pytest.raises(ValueError, match="executor"):
        PipelineBuilder().add_source([1]).pipe(testing.add(1), executor=ex)
