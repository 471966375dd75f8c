"""Resumable pipelines: a Pipeline built from a resumable source, stopped
after any delivered item or batch, checkpointed with state_dict() and
restored into a freshly built pipeline with load_state_dict(), delivers
exactly the items an uninterrupted run would have delivered after that
point: the same sequence with output_order="input" on every stage, the same
multiset otherwise; with failed and dropped items, batches, native ops, and
another thread count after the restore."""

import io
import json
from collections import Counter

import numpy as np
import pytest

import feedline
from feedline.pipeline import PipelineBuilder, build_pipeline
from feedline.pipeline.defs import Aggregate, Merge, Pipe, PipelineConfig, SinkConfig, SourceConfig
from feedline.source import DistributedRandomSampler
from feedline.source.local_directory import LocalDirectory

N = 23


def _sampler():
    return DistributedRandomSampler(N, rank=0, world_size=1, seed=5, ddp_drop_last_distributed_round=False)


def _step(i):
    # 3, 10, 17 fail; multiples of 11 are dropped.
    if i % 7 == 3:
        raise ValueError(f"item {i} is bad")
    if i % 11 == 0:
        return None
    return i * 10


async def _astep(x):
    return x + 1


def _read(path):
    i = int(path.name[:2])
    if i % 7 == 3:
        raise ValueError(f"{path} is bad")
    if i % 11 == 0:
        return None
    return path.read_bytes()


def _localdir(tmp_path):
    d = tmp_path / "files"
    if not d.exists():
        d.mkdir()
        for i in range(N):
            (d / f"{i:02d}.txt").write_bytes(f"<{i}>".encode())
    return LocalDirectory(d, "*.txt")


def _build(kind, order, threads, tmp_path):
    b = PipelineBuilder()
    if kind == "sampler":
        b.add_source(_sampler(), resumable=True)
        b.pipe(_step, concurrency=3, output_order=order)
        b.pipe(_astep, concurrency=2, output_order=order)
    elif kind == "sampler-batch":
        b.add_source(_sampler(), resumable=True)
        b.pipe(_step, concurrency=3, output_order=order)
        b.aggregate(4)
        # A dropped batch (only in input order are batches the same in every run).
        b.pipe(lambda batch: None if order == "input" and 20 in batch else batch, concurrency=2, output_order=order)
    elif kind == "localdir":
        b.add_source(_localdir(tmp_path), resumable=True)
        b.pipe(_read, concurrency=3, output_order=order)
    else:  # "batch-only": no Python op after the aggregate
        b.add_source(_sampler(), resumable=True)
        b.pipe(_step, concurrency=3, output_order=order)
        b.aggregate(3, drop_last=order == "input")  # the last batch differs otherwise
    return b.add_sink(2).build(num_threads=threads)


def _flat(values):
    out = []
    for v in values:
        out.extend(v if isinstance(v, list) else [v])
    return out


def _rest(pipeline):
    """The items of a restored pipeline. When every item left is one that
    fails, the failing stage ends the run with TooManyFailures ("all N calls
    failed"; docs/python.md), after what made it through."""
    out = []
    with pipeline.auto_stop():
        try:
            out.extend(pipeline.get_iterator(timeout=10))
        except feedline.PipelineFailure as e:
            assert "calls failed" in str(e)
    return out


def _check_resumes(build, full, order, use_get_item=False):
    for k in range(len(full) + 1):
        p = build(4)
        if use_get_item:
            got = [p.get_item(timeout=10) for _ in range(k)]
        else:
            it = p.get_iterator(timeout=10)
            got = [next(it) for _ in range(k)]
        state = p.state_dict()
        p.stop()
        assert len(json.dumps(state)) <= 1024
        q = build(1 if k % 2 else 3)
        q.load_state_dict(json.loads(json.dumps(state)))
        rest = _rest(q)
        if order == "input":
            assert got + rest == full, (k, state)
        else:
            assert Counter(_flat(got + rest)) == Counter(_flat(full)), (k, state)


@pytest.mark.parametrize("kind", ["sampler", "sampler-batch", "localdir", "batch-only"])
@pytest.mark.parametrize("order", ["input", "completion"])
def test_stop_after_every_item(kind, order, tmp_path):
    def build(threads):
        return _build(kind, order, threads, tmp_path)

    with build(4).auto_stop() as p:
        full = list(p)
    assert full
    if order == "input":  # the same at any thread count
        with build(1).auto_stop() as p:
            assert list(p) == full
    _check_resumes(build, full, order, use_get_item=kind == "sampler")


@pytest.mark.parametrize("read", ["iterator", "get_item"])
def test_failed_and_dropped_count_as_done(read):
    # In input order, once the item at position q is delivered every earlier
    # item is done: delivered, failed (3, 10, 17) or dropped (0, 11, 22).
    order = list(_sampler())
    p = _build("sampler", "input", 3, None)
    with p.auto_stop():
        values = p if read == "iterator" else iter(lambda: p.get_item(timeout=10), None)
        count = 0
        try:
            for v in values:
                q = order.index((v - 1) // 10)
                assert p.state_dict()["position"] >= q + 1
                count += 1
        except EOFError:
            pass
    assert count == N - 6


def test_state_after_the_end_resumes_to_nothing():
    p = _build("sampler", "input", 2, None)
    items = []
    while True:
        try:
            items.append(p.get_item(timeout=10))
        except EOFError:
            break
    state = p.state_dict()
    p.stop()
    assert state["pass"] == 1
    q = _build("sampler", "input", 2, None)
    q.load_state_dict(state)
    with q.auto_stop():
        assert list(q) == []


@pytest.mark.parametrize("order", ["input", "completion"])
def test_continuous_across_passes(order):
    def build(threads):
        b = PipelineBuilder().add_source(_sampler(), continuous=True, resumable=True)
        b.pipe(_step, concurrency=3, output_order=order)
        return b.add_sink(2).build(num_threads=threads)

    with build(3).auto_stop() as p:
        passes = [list(p), list(p)]
    for k in range(len(passes[0]) + 1):
        p = build(3)
        first = p.get_iterator(timeout=10)
        got = [next(first) for _ in range(k)]
        if k == len(passes[0]):
            assert list(first) == []  # the end of pass 0: the checkpoint is at pass 1
        state = p.state_dict()
        p.stop()
        q = build(2)
        q.load_state_dict(state)
        with q.auto_stop():
            rest0 = [] if state["pass"] == 1 else list(q)
            rest1 = list(q)
        if order == "input":
            assert got + rest0 == passes[0], k
            assert rest1 == passes[1]
        else:
            assert Counter(got + rest0) == Counter(passes[0]), k
            assert Counter(rest1) == Counter(passes[1])


def _embedded():
    from feedline.source import embed_shuffle

    return embed_shuffle(DistributedRandomSampler(6, rank=0, world_size=1))


def _merged():
    from feedline.source import MergeIterator

    return MergeIterator([range(3), range(10, 13)])


@pytest.mark.parametrize("make", [_embedded, _merged], ids=["embed_shuffle", "MergeIterator"])
def test_wrapping_sources_resume_in_a_later_pass(make):
    # A pass's start is recorded right after iter(source): a wrapper whose
    # __iter__ was a generator had not begun its pass then, so pass 1's
    # start was pass 0's end (the rest of pass 1 lost, pass 2 replaying 1).
    def build(threads):
        b = PipelineBuilder().add_source(make(), continuous=True, resumable=True)
        return b.pipe(_astep, concurrency=2, output_order="input").add_sink(2).build(num_threads=threads)

    with build(2).auto_stop() as p:
        passes = [list(p), list(p), list(p)]
    assert all(passes)
    for k in range(len(passes[1]) + 1):
        p = build(2)
        with p.auto_stop():
            assert list(p) == passes[0]
            it = p.get_iterator(timeout=10)
            got = [next(it) for _ in range(k)]
            state = p.state_dict()
        q = build(1)
        q.load_state_dict(state)
        with q.auto_stop():
            rest1 = [] if state["pass"] == 2 else list(q)
            rest2 = list(q)
        assert got + rest1 == passes[1], (k, state)
        assert rest2 == passes[2], (k, state)


async def _hang_on_seven(x):
    """Item 7 waits until the pipeline stops (its call is cancelled)."""
    import asyncio

    if x == 7:
        await asyncio.Event().wait()
    return x + 1


def test_a_call_cancelled_by_stop_is_not_done():
    # Stopping cancels the async calls in flight; they were marked done
    # like failures, so a run resumed from the state taken after stop()
    # skipped them.
    def build(op):
        b = PipelineBuilder().add_source(DistributedRandomSampler(8, rank=0, world_size=1), resumable=True)
        return b.pipe(op, concurrency=3, output_order="completion").add_sink(2).build(num_threads=2)

    p = build(_hang_on_seven)
    it = p.get_iterator(timeout=10)
    got = [next(it) for _ in range(7)]
    p.stop()
    state = p.state_dict()
    q = build(_astep)
    q.load_state_dict(state)
    with q.auto_stop():
        rest = list(q)
    assert rest == [8], state
    assert sorted(got + rest) == list(range(1, 9))


# -- native ops: the position rides as a sample field ---------------------------


def _npy_sample(i):
    if i % 7 == 3:
        data = b"not an npy file"  # fails in load_npy
    else:
        out = io.BytesIO()
        np.save(out, np.full((2,), i, dtype=np.int32))
        data = out.getvalue()
    return (data, i)


def _decoded(sample):
    buf, label = sample
    return (int(np.asarray(buf)[0]), label)


@pytest.mark.parametrize("shape", ["per-item", "python-after", "batch"])
@pytest.mark.parametrize("order", ["input", "completion"])
def test_native_ops(shape, order):
    from feedline.io import ops

    def build(threads):
        b = PipelineBuilder().add_source(_sampler(), resumable=True)
        # A Python op before the native one: (bytes, label) samples; 11 dropped.
        b.pipe(lambda i: None if i == 11 else _npy_sample(i), concurrency=2, output_order=order)
        b.pipe(ops.load_npy(), concurrency=3, output_order=order)
        if shape == "python-after":
            b.pipe(_decoded, concurrency=2, output_order=order)
        elif shape == "batch":
            b.aggregate(4)
            b.pipe(lambda rows: [_decoded(r) for r in rows], output_order=order)
        return b.add_sink(2).build(num_threads=threads)

    def normal(values):
        return [_decoded(v) if shape == "per-item" else v for v in values]

    with build(4).auto_stop() as p:
        full = normal(p)
    assert len(_flat(full)) == N - 4  # 3 fail, 1 dropped
    for k in range(len(full) + 1):
        p = build(4)
        it = iter(p)
        got = normal(next(it) for _ in range(k))
        state = p.state_dict()
        p.stop()
        q = build(2)
        q.load_state_dict(state)
        rest = normal(_rest(q))
        if order == "input":
            assert got + rest == full, (k, state)
        else:
            assert Counter(_flat(got + rest)) == Counter(_flat(full)), (k, state)


# -- what is not resumable --------------------------------------------------------


def test_plain_pipeline_has_no_state():
    p = PipelineBuilder().add_source(range(3)).pipe(_astep).add_sink(1).build(num_threads=1)
    with pytest.raises(TypeError, match="resumable=True"):
        p.state_dict()
    with pytest.raises(TypeError, match="resumable=True"):
        p.load_state_dict({})
    with p.auto_stop():
        assert sorted(p) == [1, 2, 3]


def test_source_without_state_is_refused():
    with pytest.raises(TypeError, match="state_dict"):
        PipelineBuilder().add_source(range(3), resumable=True)


def _gen(x):
    yield x
    yield x


@pytest.mark.parametrize(
    ("add", "name"),
    [
        (lambda b: b.aggregate(2).disaggregate(), "disaggregate"),
        (lambda b: b.pipe(_gen), "_gen"),
        (lambda b: b.path_variants(lambda x: x % 2, [[Pipe(_astep)], [Pipe(_astep)]], name="routes"), "routes"),
    ],
)
def test_unsupported_stages_are_named(add, name):
    b = PipelineBuilder().add_source(_sampler(), resumable=True)
    add(b)
    p = b.add_sink(2).build(num_threads=2)
    with pytest.raises(ValueError, match=f"'{name}'"):
        p.load_state_dict({})
    with p.auto_stop():
        assert list(p)  # it runs, untracked
    with pytest.raises(ValueError, match=f"'{name}'"):
        p.state_dict()


def test_native_op_without_field_is_named():
    from feedline.io import ops

    b = PipelineBuilder().add_source(_sampler(), resumable=True)
    b.pipe(lambda i: _npy_sample(i)[0], name="to_bytes")
    p = b.pipe(ops.load_npy(field=None), name="npy").add_sink(2).build(num_threads=2)
    with pytest.raises(ValueError, match="'npy'"):
        p.state_dict()
    p.stop()


def test_merge_is_named():
    sub = PipelineConfig(src=SourceConfig(_sampler(), resumable=True), pipes=[Pipe(_astep)])
    config = PipelineConfig(src=Merge([sub, sub]), pipes=[], sink=SinkConfig(2))
    p = build_pipeline(config, num_threads=2)
    with pytest.raises(ValueError, match="'merge'"):
        p.state_dict()
    p.stop()


def test_bad_states_and_late_load():
    p = _build("sampler", "input", 2, None)
    state = p.state_dict()
    with pytest.raises(ValueError, match="version"):
        p.load_state_dict({**state, "version": 99})
    with pytest.raises(ValueError, match="misses"):
        p.load_state_dict({"version": 1})
    with pytest.raises(ValueError, match="source_pass"):
        p.load_state_dict({**state, "source_pass": 3})
    with p.auto_stop():
        next(iter(p))
        with pytest.raises(RuntimeError, match="before the pipeline starts"):
            p.load_state_dict(state)


def test_reprs_and_names():
    def named_op(x):
        return x

    plain = PipelineBuilder().add_source(_sampler()).pipe(named_op).add_sink(1)
    resumable = PipelineBuilder().add_source(_sampler(), resumable=True).pipe(named_op).add_sink(1)
    assert "resumable" not in repr(plain)
    assert "resumable=True" in repr(resumable)
    p = resumable.build(num_threads=1)
    assert [i.stage_name for i in p.stage_infos] == [i.stage_name for i in plain.build(num_threads=1).stage_infos]
    assert "named_op" in [i.stage_name for i in p.stage_infos]
    assert "resumable=True" in str(p)
    p.stop()
    config = PipelineConfig(src=SourceConfig(_sampler(), resumable=True), pipes=[Aggregate(2)], sink=SinkConfig(1))
    q = build_pipeline(config, num_threads=1)
    with q.auto_stop():
        assert len(_flat(q)) == N
