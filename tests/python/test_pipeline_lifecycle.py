"""Lifecycle of feedline.pipeline pipelines: start/stop, timeouts, the GIL
while waiting, threads left behind, Ctrl-C, garbage collection and exit."""

import _thread
import gc
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import feedline
from feedline import _feedline_ext
from feedline.pipeline import PipelineBuilder


def os_threads():
    return len(os.listdir("/proc/self/task"))


def assert_no_pool_threads():
    """No pipeline worker thread is left in the process. A pipeline of an
    earlier test that the garbage collector freed on a worker thread stops on
    a helper thread (it cannot join its own pool); those finish within the
    bound, a leaked thread never does."""
    deadline = time.monotonic() + 30
    while _feedline_ext._live_pool_threads() != 0:
        assert time.monotonic() < deadline, _feedline_ext._live_pool_threads()
        os.sched_yield()


def test_start_twice_is_an_error_and_reads_start_the_pipeline():
    p = PipelineBuilder().add_source(range(3)).add_sink(3).build(num_threads=1)
    assert p.get_item(timeout=10) == 0  # auto start
    with pytest.raises(RuntimeError, match="already started"):
        p.start()
    p.stop()


def test_stop_is_idempotent_and_reads_after_it_raise_eof():
    p = PipelineBuilder().add_source(range(100)).add_sink(3).build(num_threads=1)
    with p.auto_stop():
        assert p.get_item(timeout=10) == 0
    p.stop()
    with pytest.raises(EOFError):
        p.get_item(timeout=10)
    assert list(p) == []


def test_get_item_timeout_raises_timeout_error():
    release = threading.Event()

    def source():
        release.wait(30)
        yield 1

    p = PipelineBuilder().add_source(source()).add_sink(3).build(num_threads=1)
    try:
        with pytest.raises(TimeoutError) as info:
            p.get_item(timeout=0.05)
        assert isinstance(info.value, feedline.Timeout)
        release.set()
        assert p.get_item(timeout=10) == 1
    finally:
        release.set()
        p.stop()


def test_the_gil_is_released_while_the_consumer_waits():
    # The source produces only after another Python thread has run 1000 loop
    # iterations; if get_item held the GIL while waiting, that thread could
    # never run and get_item would time out.
    ready = threading.Event()
    progress = []

    def worker():
        for i in range(1000):
            progress.append(i)
        ready.set()

    def source():
        assert ready.wait(30)
        yield len(progress)

    p = PipelineBuilder().add_source(source()).add_sink(1).build(num_threads=1)
    with p.auto_stop():
        t = threading.Thread(target=worker)
        t.start()
        assert p.get_item(timeout=30) == 1000
        t.join()


def test_python_ops_hold_the_gil_only_during_the_call():
    # Two pool threads each block inside an op until the other one has entered
    # its call: possible only if neither holds the GIL while waiting.
    barrier = threading.Barrier(2, timeout=30)

    def op(x):
        barrier.wait()
        return x

    p = PipelineBuilder().add_source(range(2)).pipe(op, concurrency=2).add_sink(3).build(num_threads=2)
    with p.auto_stop():
        assert sorted(p) == [0, 1]


def test_thread_local_state_persists_in_worker_threads():
    local = threading.local()
    seen = []

    def op(x):
        if not hasattr(local, "id"):
            local.id = (threading.get_ident(), x)
        seen.append((threading.get_ident(), local.id[0]))
        return x

    p = PipelineBuilder().add_source(range(200)).pipe(op).add_sink(3).build(num_threads=2)
    with p.auto_stop():
        assert len(list(p)) == 200
    assert all(ident == stored for ident, stored in seen)


def test_no_thread_is_left_behind_after_1000_cycles():
    async def aop(x):
        return x

    # Garbage pipelines of earlier tests are finalized here, not by a
    # collection that happens to run on a worker thread during the loop
    # (which stops them on a helper thread that outlives the call).
    gc.collect()
    gc.disable()
    try:
        base_os, base_py = os_threads(), threading.active_count()
        cycle_pipelines(aop)
    finally:
        gc.enable()
    # Threads of earlier tests may still be leaving; none may be added.
    assert_no_pool_threads()
    assert os_threads() <= base_os, (os_threads(), base_os)
    assert threading.active_count() <= base_py, threading.enumerate()


def cycle_pipelines(aop):
    for i in range(1000):
        b = PipelineBuilder().add_source(range(5)).pipe(lambda x: x + 1, concurrency=2).aggregate(2)
        if i % 100 == 0:
            b = b.pipe(aop)  # an event loop thread too, now and then
        p = b.add_sink(3).build(num_threads=2)
        with p.auto_stop():
            if i % 2:
                assert sum(len(batch) for batch in p) == 5
            else:
                p.get_item(timeout=10)  # stop mid-stream


def test_keyboard_interrupt_in_the_consumer_stops_the_pipeline():
    started = threading.Event()
    release = threading.Event()

    def source():
        started.set()
        release.wait(30)  # blocks the only pull until the test lets it go
        yield 1

    p = PipelineBuilder().add_source(source()).add_sink(3).build(num_threads=1)

    def interrupter():
        # Interrupt only once the consumer is inside the wait; an interrupt
        # that lands in Python code just raises there.
        assert started.wait(30)
        deadline = time.monotonic() + 30
        while not p._native.consumer_waiting:
            assert time.monotonic() < deadline
        _thread.interrupt_main()

    t = threading.Thread(target=interrupter)
    t.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            p.get_item(timeout=30)
        assert p._native.stopping  # the interrupt began the stop
    finally:
        release.set()
        t.join()
    p.stop()
    assert_no_pool_threads()
    with pytest.raises(EOFError):
        p.get_item(timeout=1)


def test_stop_timeout_when_an_op_does_not_return():
    inside = threading.Event()
    release = threading.Event()

    def stuck(x):
        inside.set()
        release.wait(30)
        return x

    p = PipelineBuilder().add_source([1]).pipe(stuck).add_sink(3).build(num_threads=1)
    p.start()
    assert inside.wait(30)
    with pytest.raises(TimeoutError):
        p.stop(timeout=0.05)
    release.set()
    p.stop()  # completes once the call returns
    assert_no_pool_threads()


def test_garbage_collected_pipeline_is_stopped():
    def make():
        p = PipelineBuilder().add_source(range(1000)).pipe(lambda x: x).add_sink(3).build(num_threads=2)
        assert p.get_item(timeout=10) == 0  # started, queues full, no stop()

    make()
    gc.collect()
    assert_no_pool_threads()


def test_a_stopped_pipeline_releases_its_ops():
    class Op:
        def __call__(self, x):
            return x

    op = Op()
    before = sys.getrefcount(op)
    p = PipelineBuilder().add_source(range(3)).pipe(op).add_sink(3).build(num_threads=1)
    assert sys.getrefcount(op) > before
    with p.auto_stop():
        assert list(p) == [0, 1, 2]
    assert sys.getrefcount(op) == before
    assert p.stats().items_delivered == 3  # statistics outlive the release


EXIT_SCRIPT = textwrap.dedent(
    """
    import asyncio, threading, time
    from feedline.pipeline import PipelineBuilder

    def slow(x):
        time.sleep(0.05)
        return x

    async def aop(x):
        await asyncio.sleep(0.01)
        return x

    # Module-level pipelines whose ops refer to module globals, never stopped:
    # one mid-stream with full queues, one never started, one with async ops.
    busy = PipelineBuilder().add_source(range(10**6)).pipe(slow, concurrency=2).add_sink(3).build(num_threads=2)
    print(busy.get_item(timeout=10), flush=True)
    idle = PipelineBuilder().add_source(range(3)).pipe(slow).add_sink(3).build(num_threads=1)
    loop = PipelineBuilder().add_source(range(10**6)).pipe(aop, concurrency=4).add_sink(3).build(num_threads=1)
    print(loop.get_item(timeout=10), flush=True)

    # A failed one, whose failure's traceback leads back to these globals.
    def bad(x):
        raise ValueError(x)

    failed = PipelineBuilder().add_source(range(3)).pipe(bad).add_sink(3).build(num_threads=1, max_failures=0)
    try:
        list(failed)
    except Exception as e:
        print(type(e).__name__, flush=True)
    print("exiting", flush=True)
    """
)


def test_pipelines_alive_at_exit_do_not_hang_the_interpreter():
    r = subprocess.run([sys.executable, "-c", EXIT_SCRIPT], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = r.stdout.split()
    assert out[2:] == ["PipelineFailure", "exiting"] and all(x.isdigit() for x in out[:2]), r.stdout
    # Nothing leaked at exit (nanobind reports leaked instances on stderr).
    assert "leaked" not in r.stderr, r.stderr
