"""Failures in feedline.pipeline: budgets, PipelineFailure and its contents,
tracebacks, and rate-limited failure logs."""

import logging
import sys
import time
import traceback
from fractions import Fraction

import pytest

import feedline
from feedline.pipeline import PipelineBuilder, PipelineFailure


def fail_on_odd(x):
    if x % 2:
        raise ValueError(f"odd item {x}")
    return x


def read_until_failure(p, timeout=10):
    got = []
    with pytest.raises(PipelineFailure) as info:
        while True:
            got.append(p.get_item(timeout=timeout))
    return got, info.value


def test_failed_calls_are_dropped_by_default():
    p = PipelineBuilder().add_source(range(10)).pipe(fail_on_odd).add_sink(3).build(num_threads=1)
    with p.auto_stop():
        assert list(p) == [0, 2, 4, 6, 8]
    assert p.stats().stages[1].failures == 5


def test_count_budget_fails_after_the_drained_items():
    # Failures 1, 3, 5 are within max_failures=3; the 4th (item 7) fails the stage.
    p = PipelineBuilder().add_source(range(10)).pipe(fail_on_odd).add_sink(3).build(num_threads=1, max_failures=3)
    with p.auto_stop():
        got, failure = read_until_failure(p)
        assert got == [0, 2, 4, 6]
        # Every later read raises it again; stop() does not raise it twice.
        with pytest.raises(PipelineFailure):
            p.get_item(timeout=10)


def test_pipeline_failure_is_an_exception_group_naming_the_stage():
    p = (
        PipelineBuilder()
        .add_source(range(10))
        .pipe(fail_on_odd, name="check")
        .add_sink(3)
        .build(num_threads=1, max_failures=0)
    )
    with p.auto_stop():
        _, failure = read_until_failure(p)
    if sys.version_info >= (3, 11):
        assert isinstance(failure, ExceptionGroup)  # noqa: F821 (3.11+)
    assert isinstance(failure, feedline.Error)
    (stage_error,) = failure.exceptions
    assert isinstance(stage_error, feedline.TooManyFailures)
    assert "Pipeline stage: 1:check" in stage_error.__notes__
    # The call that exceeded the budget is the cause, as the op raised it.
    cause = stage_error.__cause__
    assert type(cause) is ValueError and str(cause) == "odd item 1"


def test_a_stage_whose_every_call_failed_has_its_last_error_as_cause():
    # As an exceeded budget's TooManyFailures has the error that exceeded it.
    def always_fail(x):
        raise KeyError(f"key {x}")

    p = PipelineBuilder().add_source(range(3)).pipe(always_fail).add_sink(3).build(num_threads=1)
    with p.auto_stop():
        _, failure = read_until_failure(p)
    (stage_error,) = failure.exceptions
    assert isinstance(stage_error, feedline.TooManyFailures)
    assert "all 3 calls failed; last error: KeyError: 'key 2'" in str(stage_error)
    assert isinstance(stage_error.__cause__, KeyError) and stage_error.__cause__.args == ("key 2",)


def test_the_ops_exception_keeps_its_traceback():
    def inner_helper(x):
        raise KeyError(f"missing {x}")

    def lookup(x):
        return inner_helper(x)

    p = PipelineBuilder().add_source([5]).pipe(lookup).add_sink(3).build(num_threads=1, max_failures=0)
    with p.auto_stop():
        _, failure = read_until_failure(p)
    cause = failure.exceptions[0].__cause__
    frames = [f.name for f in traceback.extract_tb(cause.__traceback__)]
    assert frames[-2:] == ["lookup", "inner_helper"]


EXCEPT_STAR = """
caught = []
with p.auto_stop():
    try:
        list(p)
    except* feedline.TooManyFailures as group:
        caught.append(group)
"""


@pytest.mark.skipif(sys.version_info < (3, 11), reason="except* is Python 3.11+ syntax")
def test_except_star_selects_stage_errors():
    p = PipelineBuilder().add_source(range(3)).pipe(fail_on_odd).add_sink(3).build(num_threads=1, max_failures=0)
    scope = {"p": p, "feedline": feedline}
    exec(compile(EXCEPT_STAR, "<except*>", "exec"), scope)  # compiles on 3.10 too
    caught = scope["caught"]
    assert len(caught) == 1 and isinstance(caught[0], PipelineFailure)


def test_failure_reaches_the_for_loop_not_only_stop():
    # SPDL ends the loop normally and raises from stop(); feedline raises in
    # the loop, after the items that made it through.
    p = PipelineBuilder().add_source(range(10)).pipe(fail_on_odd).add_sink(3).build(num_threads=1, max_failures=1)
    got = []
    with pytest.raises(PipelineFailure):
        for x in p:
            got.append(x)
    assert got == [0, 2]
    p.stop()  # already seen by the consumer: not raised again


def test_stop_raises_a_failure_the_consumer_has_not_seen():
    p = PipelineBuilder().add_source(range(10)).pipe(fail_on_odd).add_sink(10).build(num_threads=1, max_failures=0)
    p.start()
    assert p.get_item(timeout=10) == 0  # the failure comes after this item
    # Wait for the stage to have failed (a condition, polled with a bound).
    deadline = time.monotonic() + 30
    while not p.stats().stages[1].finished:
        assert time.monotonic() < deadline
    with pytest.raises(PipelineFailure):
        p.stop()
    p.stop()  # reported once


def test_source_failure_delivers_earlier_items_first():
    def source():
        yield 1
        yield 2
        raise OSError("disk gone")

    p = PipelineBuilder().add_source(source()).pipe(lambda x: x * 10).add_sink(3).build(num_threads=1)
    with p.auto_stop():
        got, failure = read_until_failure(p)
    assert got == [10, 20]
    (err,) = failure.exceptions
    assert type(err) is OSError and "Pipeline stage: 0:src" in err.__notes__


def test_rate_budget_is_checked_after_probation():
    # 20% of calls fail: within Fraction(1, 4) it never trips...
    def fail_one_in_five(x):
        if x % 5 == 0:
            raise ValueError(x)
        return x

    p = (
        PipelineBuilder()
        .add_source(range(500))
        .pipe(fail_one_in_five)
        .add_sink(3)
        .build(num_threads=1, max_failures=Fraction(1, 4))
    )
    with p.auto_stop():
        assert len(list(p)) == 400
    # ... and over Fraction(1, 10) it trips, but only after 100 calls.
    p = (
        PipelineBuilder()
        .add_source(range(500))
        .pipe(fail_one_in_five)
        .add_sink(3)
        .build(num_threads=1, max_failures=Fraction(1, 10))
    )
    with p.auto_stop():
        got, failure = read_until_failure(p)
    assert 80 <= len(got) < 400
    assert "10.0%" in str(failure.exceptions[0])


def test_pipe_budget_overrides_the_pipeline_budget():
    # The pipeline tolerates everything; the strict stage does not.
    p = (
        PipelineBuilder()
        .add_source(range(10))
        .pipe(fail_on_odd, name="lenient")
        .pipe(lambda x: 1 // (x - 4), name="strict", max_failures=0)
        .add_sink(3)
        .build(num_threads=1, max_failures=-1)
    )
    with p.auto_stop():
        _, failure = read_until_failure(p)
    (err,) = failure.exceptions
    assert "Pipeline stage: 2:strict" in err.__notes__
    assert type(err.__cause__) is ZeroDivisionError


def test_pipeline_budget_is_shared_by_stages_without_their_own():
    # Two stages fail once each: 2 > max_failures=1 only when counted together.
    p = (
        PipelineBuilder()
        .add_source(range(4))
        .pipe(lambda x: 1 // (x - 1))
        .pipe(lambda x: 1 // (x + 1))
        .add_sink(3)
        .build(num_threads=1, max_failures=1)
    )
    with p.auto_stop(), pytest.raises(PipelineFailure):
        list(p)


@pytest.mark.parametrize("bad", [Fraction(0), Fraction(3, 2), -2, 1.5, True])
def test_invalid_budgets_are_rejected(bad):
    with pytest.raises((ValueError, TypeError)):
        PipelineBuilder().add_source([1]).pipe(fail_on_odd, max_failures=bad)
    with pytest.raises((ValueError, TypeError)):
        PipelineBuilder().add_source([1]).add_sink().build(num_threads=1, max_failures=bad)


def test_async_op_failures_are_counted_and_carried():
    async def op(x):
        if x == 2:
            raise RuntimeError("async boom")
        return x

    p = PipelineBuilder().add_source(range(4)).pipe(op, concurrency=2).add_sink(3).build(num_threads=1, max_failures=0)
    with p.auto_stop():
        got, failure = read_until_failure(p)
    assert set(got) <= {0, 1, 3}
    assert str(failure.exceptions[0].__cause__) == "async boom"


def test_generator_failure_drops_the_rest_of_that_generator():
    def gen(x):
        yield x
        if x == 1:
            raise ValueError("bad")
        yield x + 100

    p = PipelineBuilder().add_source(range(3)).pipe(gen).add_sink(3).build(num_threads=1)
    with p.auto_stop():
        assert sorted(p) == [0, 1, 2, 100, 102]
    assert p.stats().stages[1].failures == 1


def test_failure_log_is_rate_limited(caplog):
    def always_fail(x):
        raise ValueError(f"bad item {x}")

    caplog.set_level(logging.WARNING, logger="feedline")
    p = PipelineBuilder().add_source(range(2000)).pipe(always_fail).add_sink(3).build(num_threads=2)
    # Every call failed: the end is a failure (docs/errors.md).
    with p.auto_stop(), pytest.raises(PipelineFailure, match="all 2000 calls failed"):
        list(p)
    lines = [r.getMessage() for r in caplog.records if r.name == "feedline"]
    # The first 5 in full, then summaries: a handful of lines, not 2000.
    assert 5 <= len(lines) <= 10, lines
    # The op's exception, described with the innermost frame of its traceback.
    assert "ValueError: bad item 0 (at " in lines[0]
    assert "test_pipeline_failures.py:" in lines[0] and " in always_fail)" in lines[0]
    assert any("2000" in line or "suppressed" in line for line in lines[5:])


def test_aggregator_errors_are_the_ops_own_exceptions():
    from feedline.pipeline.defs import Aggregator

    class Picky(Aggregator):
        def accumulate(self, item):
            if item == 3:
                raise LookupError("no 3s")
            return [item]

        def flush(self):
            return None

    p = PipelineBuilder().add_source(range(5)).aggregate(Picky()).add_sink(3).build(num_threads=1, max_failures=0)
    with p.auto_stop():
        got, failure = read_until_failure(p)
    assert got == [[0], [1], [2]]
    cause = failure.exceptions[0].__cause__
    assert type(cause) is LookupError and str(cause) == "no 3s"
