"""Failure budgets as native objects, and a stopped pipeline's failure handed
over to Python so that the garbage collector can see what it refers to."""

import gc
import weakref
from fractions import Fraction

import pytest

from feedline import PipelineFailure
from feedline._feedline_ext import FailureBudget
from feedline.pipeline import PipelineBuilder
from feedline.pipeline._build import _budget


def test_failure_budgets_are_native_objects():
    assert repr(FailureBudget.unlimited()) == "FailureBudget(unlimited)"
    assert repr(FailureBudget.max_count(3)) == "FailureBudget(3)"
    assert repr(FailureBudget.max_rate(1, 10)) == "FailureBudget(10.0% after 100 calls)"
    assert FailureBudget.max_count(3).exceeded(4, 10)
    assert not FailureBudget.max_count(3).exceeded(3, 10)
    assert not FailureBudget.unlimited().exceeded(10**6, 10**6)
    with pytest.raises(ValueError, match="rate"):
        FailureBudget.max_rate(3, 2)


def test_max_failures_become_failure_budgets():
    assert _budget(None) is None
    assert repr(_budget(-1)) == "FailureBudget(unlimited)"
    assert repr(_budget(0)) == "FailureBudget(0)"
    assert repr(_budget(Fraction(1, 4))) == "FailureBudget(25.0% after 100 calls)"


def _failed_and_stopped_pipeline():
    """A stopped pipeline whose failure's traceback leads back to it, through
    the failing op's frame. Returns a weak reference to it."""
    holder = []

    def bad(x):
        assert holder
        raise ValueError(x)

    p = PipelineBuilder().add_source(range(3)).pipe(bad).add_sink(3).build(num_threads=1, max_failures=0)
    holder.append(p)
    with pytest.raises(PipelineFailure):
        list(p)
    p.stop()
    return weakref.ref(p)


def test_a_failed_pipeline_whose_traceback_refers_to_it_is_collected():
    alive = _failed_and_stopped_pipeline()
    gc.collect()
    assert alive() is None
