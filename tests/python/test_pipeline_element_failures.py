"""Elements a batch op leaves out are counted failures of its stage (logged,
in the statistics, held against the failure budget); a stage whose every
call fails ends the pipeline with an error, whatever its budget."""

import logging

import numpy as np
import pytest

import feedline
from feedline import PipelineFailure
from feedline.io import ops
from feedline.pipeline import PipelineBuilder


@pytest.fixture(scope="module")
def png():
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = f"{d}/a.png"
        subprocess.run(
            ["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=32x24", "-frames:v", "1", path],
            check=True,
        )
        with open(path, "rb") as f:
            return f.read()


def decode_batches(srcs, batch, **build):
    p = (
        PipelineBuilder()
        .add_source(srcs)
        .aggregate(batch)
        .pipe(ops.decode_batch(width=8, height=8), name="decode")
        .add_sink(4)
        .build(num_threads=1, **build)
    )
    return p


def test_images_left_out_of_a_batch_are_counted_failures(png, caplog):
    # 3 batches of 4; one bad image in each of the first two, bytes and a
    # value that does not convert (an int) in the third.
    srcs = [png] * 12
    srcs[1] = b"not an image"
    srcs[6] = b"\xff\xd8\xff broken"
    srcs[9] = 42
    caplog.set_level(logging.WARNING, logger="feedline")
    p = decode_batches(srcs, 4)
    with p.auto_stop():
        sizes = [b.shape[0] for b in p]
    assert sizes == [3, 3, 3]
    stage = p.stats().stages[2]
    assert (stage.calls, stage.failures) == (3, 3), stage
    messages = [r.getMessage() for r in caplog.records]
    assert any("decode_batch" in m and "call failed" in m for m in messages), messages
    assert any("element 1" in m for m in messages), messages


def test_the_failure_budget_applies_to_images_left_out(png):
    srcs = [png, b"bad"] * 20  # one bad image per batch of 2
    p = decode_batches(srcs, 2, max_failures=3)
    with p.auto_stop(), pytest.raises(PipelineFailure) as info:
        list(p)
    cause = info.value.exceptions[0]
    assert isinstance(cause, feedline.TooManyFailures), cause
    assert p.stats().stages[2].failures == 4


def test_a_stage_whose_every_call_fails_fails_the_pipeline():
    def broken(x):
        raise KeyError(x)

    p = PipelineBuilder().add_source(range(7)).pipe(broken).add_sink(3).build(num_threads=1)
    with p.auto_stop(), pytest.raises(PipelineFailure) as info:
        assert list(p) == []
    assert "all 7 calls failed" in str(info.value), info.value
    assert isinstance(info.value.exceptions[0], feedline.TooManyFailures)
    # One success is enough for a normal end.
    p = PipelineBuilder().add_source(range(7)).pipe(lambda x: x if x == 6 else broken(x))
    p = p.add_sink(3).build(num_threads=1)
    with p.auto_stop():
        assert list(p) == [6]


def test_a_batch_where_nothing_decodes_counts_each_image_once(png):
    p = decode_batches([png, png, b"x", b"y"], 2)
    with p.auto_stop():
        (batch,) = list(p)
    assert np.asarray(batch).shape[0] == 2
    stage = p.stats().stages[2]
    assert (stage.calls, stage.failures) == (2, 2), stage
