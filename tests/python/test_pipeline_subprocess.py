"""iterate_in_subprocess() and run_pipeline_in_subprocess(): values, passes,
initializers, failures in the worker, dead workers and parents, exit with a
live worker, and no leaked processes or descriptors."""

from __future__ import annotations

import concurrent.futures
import gc
import multiprocessing
import os
import pickle
import queue
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
from conftest import process_gone

from feedline.io import ops
from feedline.pipeline import PipelineBuilder, iterate_in_subprocess, run_pipeline_in_subprocess
from feedline.pipeline.defs import MAIN_PROCESS, Pipe, ProcessPoolExecutorConfig

# -- worker-side callables (module level: they pickle by reference) ---------------


class Reiterable:
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))


def five():
    return Reiterable(5)


def many():
    return Reiterable(2000)


def three_arrays():
    return [np.full(8192, i, np.uint8) for i in range(3)]


def one_large_array():
    return [np.zeros(1 << 20, np.uint8)]


def gen_five():
    return (i for i in range(5))


def from_env():
    return [os.environ.get("FEEDLINE_TEST_INIT", "unset"), os.environ.get("FEEDLINE_TEST_INIT2", "unset")]


def init_one():
    os.environ["FEEDLINE_TEST_INIT"] = "one"


def init_two():
    os.environ["FEEDLINE_TEST_INIT2"] = "two"


def init_fails():
    raise ValueError("no GPU in this worker")


def fn_fails():
    raise KeyError("the dataset index")


def _three_then_fail():
    yield from range(3)
    raise IndexError("record 3 is corrupt")


def fails_after_three():
    return _three_then_fail()


class WithALock:
    """Yields an item that does not pickle (a lock) between two that do."""

    def __iter__(self):
        import threading

        yield 0
        yield threading.Lock()
        yield 2


def with_a_lock():
    return WithALock()


class NotIterable:
    def __iter__(self):
        raise OSError("the shard list is unreadable")


def not_iterable():
    return NotIterable()


class FailsInSecondPass:
    def __init__(self):
        self.passes = 0

    def __iter__(self):
        self.passes += 1
        if self.passes == 2:
            raise ValueError("pass 2 is broken")
        return iter(range(3))


def fails_in_second_pass():
    return FailsInSecondPass()


class PidThenWait:
    """Yields the worker's pid, then waits on ``event`` before each value."""

    def __init__(self, event):
        self.event = event

    def __iter__(self):
        yield os.getpid()
        while True:
            self.event.wait()
            yield 1


def random_draws(_):
    return random.random(), float(np.random.random())


def pid_of(_):
    return os.getpid()


# -- iterate_in_subprocess --------------------------------------------------------


def test_values_cross_and_each_iter_is_one_pass():
    it = iterate_in_subprocess(five)
    assert list(it) == [0, 1, 2, 3, 4]
    assert list(it) == [0, 1, 2, 3, 4]
    # A generator made once is used up after its first pass, as in SPDL.
    g = iterate_in_subprocess(gen_five)
    assert list(g) == [0, 1, 2, 3, 4]
    assert list(g) == []


def test_break_keeps_the_worker_for_the_next_pass():
    it = iterate_in_subprocess(five, buffer_size=1)
    pid = it.pid
    for _ in range(4):
        for x in it:
            if x == 2:
                break
        assert list(zip(it, "ab")) == [(0, "a"), (1, "b")]
    assert list(it) == [0, 1, 2, 3, 4]
    assert it.pid == pid


def test_an_unpicklable_item_is_an_error_not_a_lost_item():
    # The multiprocessing queue pickles in a thread of its own, which prints
    # the error and drops the item: the pass would go on one item short.
    it = iterate_in_subprocess(with_a_lock)
    got = []
    with pytest.raises(RuntimeError, match=r"Failed to pickle the item.*lock"):
        for x in it:
            got.append(x)
    assert got == [0]


def test_an_iterable_whose_iter_raises_is_reported():
    it = iterate_in_subprocess(not_iterable)
    with pytest.raises(RuntimeError, match="Failed to start a pass.*the shard list is unreadable"):
        list(it)


def test_an_older_iterator_never_takes_a_newer_passs_items():
    it = iterate_in_subprocess(five, buffer_size=1)
    a = iter(it)
    assert next(a) == 0
    b = iter(it)
    with pytest.raises(RuntimeError, match="superseded"):
        next(a)
    assert list(b) == [0, 1, 2, 3, 4]  # nothing lost to the older iterator
    # Interleaved (zip of two passes): the older one stops with the error,
    # the newer one still gets every item.
    a = iter(it)
    b = iter(it)
    with pytest.raises(RuntimeError, match="superseded"):
        list(zip(b, a))
    assert list(b) == [1, 2, 3, 4]
    assert list(it) == [0, 1, 2, 3, 4]


def test_a_failure_in_an_abandoned_pass_is_reported_in_the_next():
    it = iterate_in_subprocess(fails_in_second_pass)
    assert list(it) == [0, 1, 2]
    a = iter(it)  # pass 2 fails in the worker; nobody reads it
    b = iter(it)
    del a
    with pytest.raises(RuntimeError, match="during an earlier pass.*pass 2 is broken"):
        list(b)


def test_initializers_run_first_in_the_worker():
    assert list(iterate_in_subprocess(from_env, initializer=init_one)) == ["one", "unset"]
    assert list(iterate_in_subprocess(from_env, initializer=[init_one, init_two])) == ["one", "two"]
    assert os.environ.get("FEEDLINE_TEST_INIT") is None  # not in the parent


@pytest.mark.parametrize(
    ("fn", "init", "match"),
    [
        (five, init_fails, "Initializer failed: ValueError: no GPU in this worker"),
        (fn_fails, None, "Failed to create the iterable: KeyError: 'the dataset index'"),
    ],
)
def test_start_failures_raise_in_the_parent(fn, init, match):
    with pytest.raises(RuntimeError, match=match):
        iterate_in_subprocess(fn, initializer=init)
    assert multiprocessing.active_children() == [] or all(not p.is_alive() for p in multiprocessing.active_children())


def test_a_failing_iterator_surfaces_with_its_traceback_and_ends_the_worker():
    it = iterate_in_subprocess(fails_after_three)
    got = []
    with pytest.raises(RuntimeError) as info:
        for x in it:
            got.append(x)
    assert got == [0, 1, 2]
    message = str(info.value)
    assert "Failed to fetch the next item: IndexError: record 3 is corrupt" in message
    assert "_three_then_fail" in message  # the worker's traceback
    assert process_gone(it.pid)
    with pytest.raises(RuntimeError, match="Cannot iterate again"):
        iter(it)


def test_timeout_when_the_worker_is_silent():
    event = multiprocessing.get_context("forkserver").Event()
    # The timeout also bounds the worker's start, which takes well under a
    # second, also on a loaded 2-core machine.
    it = iterate_in_subprocess(_pid_then_wait_factory(event), timeout=3)
    values = iter(it)
    pid = next(values)
    with pytest.raises(RuntimeError, match="did not produce any data for 3 seconds"):
        next(values)
    assert process_gone(pid)


class _pid_then_wait_factory:  # noqa: N801 - a picklable closure
    def __init__(self, event):
        self.event = event

    def __call__(self):
        return PidThenWait(self.event)


def test_a_killed_worker_is_an_error_not_a_hang():
    event = multiprocessing.get_context("forkserver").Event()
    it = iterate_in_subprocess(_pid_then_wait_factory(event))
    values = iter(it)
    pid = next(values)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(RuntimeError, match=r"quit \(exit code -9\)"):
        next(values)


def _session_members(sid: int) -> list[int]:
    """The live (not zombie) processes of session ``sid``."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[3]) == sid and fields[0] not in ("Z", "X"):
            members.append(int(entry))
    return members


def _script(body: str) -> subprocess.Popen:
    code = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        """
    ) + textwrap.dedent(body)
    return subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def test_the_worker_exits_when_its_parent_is_killed():
    proc = _script(
        """
        import multiprocessing, threading
        from feedline.pipeline import iterate_in_subprocess
        from test_pipeline_subprocess import _pid_then_wait_factory
        event = multiprocessing.get_context("forkserver").Event()
        values = iter(iterate_in_subprocess(_pid_then_wait_factory(event)))
        print(next(values), flush=True)
        threading.Event().wait()
        """
    )
    worker = int(proc.stdout.readline())
    proc.kill()
    proc.wait(timeout=30)
    assert process_gone(worker), "the worker outlived its killed parent"
    # Nor does anything else the parent started (the forkserver, the
    # resource tracker): its session empties.
    deadline = time.monotonic() + 15
    while _session_members(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling for exits with a deadline
    assert _session_members(proc.pid) == []


@pytest.mark.parametrize("state", ["blocked-on-put", "waiting-in-fn", "stand-by", "failed"])
def test_interpreter_exit_with_a_live_worker_is_clean(state):
    body = {
        "blocked-on-put": "it = iterate_in_subprocess(five, buffer_size=1); values = iter(it); next(values)",
        "waiting-in-fn": (
            "import multiprocessing\n"
            "from test_pipeline_subprocess import _pid_then_wait_factory\n"
            "ev = multiprocessing.get_context('forkserver').Event()\n"
            "values = iter(iterate_in_subprocess(_pid_then_wait_factory(ev))); next(values)"
        ),
        "stand-by": "it = iterate_in_subprocess(five); list(it)",
        "failed": (
            "from test_pipeline_subprocess import fails_after_three\n"
            "it = iterate_in_subprocess(fails_after_three)\n"
            "try:\n    list(it)\nexcept RuntimeError:\n    pass"
        ),
    }[state]
    proc = _script(
        "from feedline.pipeline import iterate_in_subprocess\n"
        "from test_pipeline_subprocess import five\n" + body + "\nprint('end', flush=True)\n"
    )
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.strip() == "end"
    assert "Traceback" not in err, err


@pytest.mark.parametrize("daemon", [False, True])
def test_a_forked_child_that_exits_leaves_the_worker_to_the_parent(daemon):
    # A child made with os.fork() inherits multiprocessing's list of the
    # parent's workers and the iterable's finalizer. Its normal exit must not
    # terminate the parent's worker (a daemon) nor try to join it; the
    # inherited iterable refuses to be read there.
    proc = _script(
        f"""
        import os
        from feedline.pipeline import iterate_in_subprocess
        from test_pipeline_subprocess import many
        it = iterate_in_subprocess(many, buffer_size=2, daemon={daemon})
        values = iter(it)
        got = [next(values) for _ in range(10)]
        pid = os.fork()
        if pid == 0:
            refused = 0
            for read in (lambda: next(values), lambda: iter(it)):
                try:
                    read()
                except RuntimeError as e:
                    refused += "belongs to the parent process" in str(e)
            sys.exit(0 if refused == 2 else 5)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
        got += list(values)
        assert got == list(range(2000)), len(got)
        print("parent ok", flush=True)
        """
    )
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.strip() == "parent ok", out
    assert "Traceback" not in err, err


def test_dropping_the_iterable_stops_its_worker_and_leaks_nothing():
    assert list(iterate_in_subprocess(five)) == list(range(5))  # starts the forkserver and resource tracker
    fds = set(os.listdir("/proc/self/fd"))
    it = iterate_in_subprocess(five, buffer_size=1)
    values = iter(it)
    next(values)
    pid = it.pid
    del values, it
    gc.collect()
    assert process_gone(pid)
    assert set(os.listdir("/proc/self/fd")) <= fds


def megabytes():
    """Items of 1 MiB, more than a pipe holds: the worker's queue sends each
    in several writes."""
    while True:
        yield bytes(1 << 20)


def one_megabyte_then_wait():
    yield bytes(1 << 20)
    threading.Event().wait()


def test_dropping_the_iterable_while_the_worker_sends_a_large_item_does_not_hang():
    # The worker leaves at the abort with an item half-written to the pipe;
    # the parent, draining it, waited for the rest for good (it holds the
    # pipe's write end too, so the worker's exit was no end of file).
    proc = _script(
        """
        import gc
        from feedline.pipeline import iterate_in_subprocess
        from test_pipeline_subprocess import megabytes
        for _ in range(3):
            it = iterate_in_subprocess(megabytes, buffer_size=4)
            got = [len(x) for x, _ in zip(it, range(3))]
            del it
            gc.collect()
        print(got, flush=True)
        """
    )
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.strip() == str([1 << 20] * 3), out


def test_a_worker_killed_half_way_through_sending_an_item_is_an_error_not_a_hang():
    proc = _script(
        """
        import os, signal
        from conftest import process_gone
        from feedline.pipeline import iterate_in_subprocess
        from test_pipeline_subprocess import one_megabyte_then_wait
        it = iterate_in_subprocess(one_megabyte_then_wait)
        values = iter(it)
        assert it._data._reader.poll(60)  # the item's first bytes are in the pipe, the rest waits
        os.kill(it.pid, signal.SIGKILL)
        assert process_gone(it.pid)
        try:
            next(values)
        except RuntimeError as e:
            print(e, flush=True)
        """
    )
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "quit (exit code -9)" in out, out


def test_a_worker_that_died_with_its_command_pipe_full_does_not_hold_up_the_stop():
    # The parent's feeder thread for the commands queue closes the pipe only
    # once it has written everything put; with the worker dead and the pipe
    # full, the stop waited for it for good. Commands are small, so the full
    # pipe is made by hand here; the stop is the iterable's own.
    proc = _script(
        """
        import gc, os, signal, threading
        from conftest import process_gone
        from feedline.pipeline import iterate_in_subprocess
        from test_pipeline_subprocess import one_megabyte_then_wait
        it = iterate_in_subprocess(one_megabyte_then_wait)
        next(iter(it))
        os.kill(it.pid, signal.SIGKILL)
        assert process_gone(it.pid)
        it._commands.put(("padding", bytes(1 << 20)))  # more than the pipe holds
        del it
        gc.collect()
        feeders = [t for t in threading.enumerate() if "feeder" in t.name.lower()]
        print(len(feeders), flush=True)
        """
    )
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.strip() == "0", out


def test_the_parents_reader_never_waits_inside_a_message():
    # What a worker sends arrives in pieces; the parent must take whole
    # messages only, never wait for the rest of one (its writer may be
    # dead), give back the room each took, and see the end of the pipe.
    import struct

    from feedline.pipeline._subprocess import _Receiver

    q = multiprocessing.get_context("forkserver").Queue(maxsize=1)
    receiver = _Receiver(q)
    fd = q._writer.fileno()
    first = pickle.dumps(("item", b"x" * 20_000))
    second = pickle.dumps("the long form of the length")
    os.write(fd, struct.pack("!i", len(first)) + first[:1000])
    with pytest.raises(queue.Empty):
        receiver.get(timeout=0.01)
    assert q._sem.acquire(False)  # the writer's room for the message
    os.write(fd, first[1000:] + struct.pack("!i", -1) + struct.pack("!Q", len(second)) + second[:5])
    assert receiver.get() == ("item", b"x" * 20_000)
    assert q._sem.acquire(False)  # its room was given back
    with pytest.raises(queue.Empty):
        receiver.get()
    os.write(fd, second[5:] + b"\x00\x00")  # then half a header, and the writer goes
    assert receiver.get() == "the long form of the length"
    q._writer.close()
    with pytest.raises(EOFError):
        receiver.get(timeout=5)


def test_unpicklable_fn_needs_the_fork_start_method():
    with pytest.raises(TypeError, match="mp_context='fork'"):
        iterate_in_subprocess(lambda: [1, 2])
    assert list(iterate_in_subprocess(lambda: [1, 2], mp_context="fork")) == [1, 2]


@pytest.mark.parametrize("kwargs", [{"buffer_size": 0}, {"timeout": 0}, {"buffer_size": "3"}])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        iterate_in_subprocess(five, **kwargs)


# -- run_pipeline_in_subprocess ---------------------------------------------------


def _files(tmp_path, n=6):
    paths = []
    for i in range(n):
        p = tmp_path / f"{i}.bin"
        p.write_bytes(bytes([i]) * (i + 1))
        paths.append(str(p))
    return paths


def test_same_output_as_in_process_with_native_ops(tmp_path):
    paths = _files(tmp_path)
    config = (
        PipelineBuilder()
        .add_source(paths)
        .pipe(ops.read_file(), concurrency=2, output_order="input")
        .pipe(bytes)
        .add_sink(3)
        .get_config()
    )
    here = (
        PipelineBuilder()
        .add_source(paths)
        .pipe(ops.read_file(), concurrency=2, output_order="input")
        .pipe(bytes)
        .add_sink(3)
    )
    with (pipeline := here.build(num_threads=2)).auto_stop():
        expected = list(pipeline)
    remote = run_pipeline_in_subprocess(config, num_threads=2)
    assert list(remote) == expected
    assert list(remote) == expected  # a second pass builds the pipeline again


def test_a_builder_is_accepted_with_a_deprecation_warning(tmp_path):
    builder = PipelineBuilder().add_source(range(4)).pipe(pid_of).add_sink(3)
    with pytest.warns(DeprecationWarning, match="get_config"):
        remote = run_pipeline_in_subprocess(builder, num_threads=1)
    pids = list(remote)
    assert len(pids) == 4 and set(pids) == {remote.pid} and remote.pid != os.getpid()


def test_a_continuous_source_keeps_one_warm_pipeline_across_passes():
    config = PipelineBuilder().add_source(Reiterable(3), continuous=True).pipe(pid_of).add_sink(3).get_config()
    remote = run_pipeline_in_subprocess(config, num_threads=1)
    assert list(remote) == [remote.pid] * 3
    assert list(remote) == [remote.pid] * 3


def test_the_worker_continues_the_parents_rng_streams():
    random.seed(12)
    np.random.seed(34)
    random.random(), np.random.random()  # advance both
    state = random.getstate(), np.random.get_state()
    config = PipelineBuilder().add_source(range(3)).pipe(random_draws).add_sink(3).get_config()
    remote = list(run_pipeline_in_subprocess(config, num_threads=1))
    random.setstate(state[0])
    np.random.set_state(state[1])
    assert remote == [(random.random(), float(np.random.random())) for _ in range(3)]


def test_a_stage_failure_in_the_worker_reaches_the_parent():
    config = PipelineBuilder().add_source(["/no/such/file"]).pipe(ops.read_file()).add_sink(3).get_config()
    remote = run_pipeline_in_subprocess(config, num_threads=1, max_failures=0)
    with pytest.raises(RuntimeError, match="no/such/file"):
        list(remote)


def thread_and_pid(_):
    import threading

    return threading.current_thread().name, os.getpid()


def and_pid(value):
    return (*value, os.getpid())


def _executor_config(first, second=None):
    builder = PipelineBuilder().add_source(range(6)).pipe(thread_and_pid, executor=first)
    if second is not None:
        builder = builder.pipe(and_pid, executor=second)
    return builder.add_sink(6).get_config()


def _region_config(n):
    """Items ``range(n)`` through a one-process region that returns its pid."""
    builder = PipelineBuilder().add_source(range(n)).to(ProcessPoolExecutorConfig(max_workers=1))
    return builder.pipe(pid_of).to(MAIN_PROCESS).add_sink(n).get_config()


def test_a_stages_thread_pool_is_rebuilt_in_the_worker():
    pool = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="mypool")
    remote = run_pipeline_in_subprocess(_executor_config(pool), num_threads=1)
    out = list(remote)
    assert len(out) == 6
    assert all(name.startswith("mypool") and pid == remote.pid for name, pid in out)
    # The parent's executor was not used (a fresh one ran in the worker).
    assert pool._threads == set()
    pool.shutdown()


def test_a_stages_process_pool_runs_in_the_workers_children_which_exit_when_it_is_killed():
    pool = concurrent.futures.ProcessPoolExecutor(2)
    remote = run_pipeline_in_subprocess(_executor_config(pool, pool), num_threads=2)
    out = list(remote)
    assert len(out) == 6
    children = {pid for _, *pids in out for pid in pids}
    assert remote.pid not in children and os.getpid() not in children
    assert 1 <= len(children) <= 2  # one pool of 2 processes, though two stages use it
    assert pool._processes == {} or pool._processes is None  # the parent's executor never started
    os.kill(remote.pid, signal.SIGKILL)
    for pid in children:
        assert process_gone(pid), f"the pool's process {pid} outlived its killed worker"
    with pytest.raises(RuntimeError, match="quit"):
        list(remote)


def set_marker(value):
    os.environ["FEEDLINE_TEST_MARKER"] = value


def marker(_):
    return os.environ.get("FEEDLINE_TEST_MARKER"), os.getpid()


def test_a_rebuilt_pool_runs_its_initializer_in_the_worker():
    pool = concurrent.futures.ThreadPoolExecutor(1, initializer=set_marker, initargs=("set in the worker",))
    config = PipelineBuilder().add_source(range(2)).pipe(marker, executor=pool).add_sink(2).get_config()
    remote = run_pipeline_in_subprocess(config, num_threads=1)
    assert list(remote) == [("set in the worker", remote.pid)] * 2
    assert "FEEDLINE_TEST_MARKER" not in os.environ
    pool.shutdown()


def test_the_initializer_is_read_from_python_314s_worker_context_factory():
    # Python 3.14's ThreadPoolExecutor has no _initializer: it keeps the
    # initializer in the closure of _create_worker_context.
    from feedline.pipeline._portable import _initializer_of

    def prepare(initializer, initargs):
        def create_context():
            return (initializer, initargs)

        return create_context

    class Layout314:
        _create_worker_context = staticmethod(prepare(set_marker, ["x"]))

    assert _initializer_of(Layout314(), "stage 'f'") == (set_marker, ("x",))
    with pytest.raises(ValueError, match="stage 'f': cannot read the initializer"):
        _initializer_of(object(), "stage 'f'")


def is_odd(x):
    return x % 2


def test_an_executor_in_a_path_variant_is_rebuilt_in_the_worker():
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="evenpool")
    config = (
        PipelineBuilder()
        .add_source(range(6))
        .path_variants(is_odd, [[Pipe(thread_and_pid, executor=pool)], [Pipe(thread_and_pid)]])
        .add_sink(6)
        .get_config()
    )
    remote = run_pipeline_in_subprocess(config, num_threads=1)
    names = [name for name, pid in remote if pid == remote.pid]
    assert len(names) == 6 and sum(name.startswith("evenpool") for name in names) == 3
    pool.shutdown()


def test_an_executor_that_has_run_work_is_refused():
    pool = concurrent.futures.ThreadPoolExecutor(1)
    pool.submit(int).result()
    with pytest.raises(ValueError, match="stage 'thread_and_pid'.*fresh one"):
        run_pipeline_in_subprocess(_executor_config(pool), num_threads=1)
    pool.shutdown()


def test_a_daemon_worker_with_a_process_pool_or_region_is_refused():
    pool = concurrent.futures.ProcessPoolExecutor(1)
    with pytest.raises(ValueError, match="daemon.*ProcessPoolExecutor"):
        run_pipeline_in_subprocess(_executor_config(pool), num_threads=1, daemon=True)
    with pytest.raises(ValueError, match="daemon.*region"):
        run_pipeline_in_subprocess(_region_config(3), num_threads=1, daemon=True)


def test_a_region_in_the_worker_runs_in_its_children():
    remote = run_pipeline_in_subprocess(_region_config(4), num_threads=2)
    pids = set(remote)
    assert len(pids) == 1 and remote.pid not in pids and os.getpid() not in pids


def test_native_ops_pickle_as_their_factory_call():
    op = ops.decode_image(resize_shorter=10, field=1)
    again = pickle.loads(pickle.dumps(op))
    assert again.field == 1 and again._recipe == ("decode_image", {"resize_shorter": 10, "field": 1})


# -- shared memory ----------------------------------------------------------------


class StampedArrays:
    """``n`` arrays of ``size`` bytes; array i is filled from its index and
    ends with a checksum of the rest."""

    def __init__(self, n, size):
        self.n, self.size = n, size

    def __iter__(self):
        for i in range(self.n):
            a = np.random.default_rng(i).integers(0, 256, self.size, dtype=np.uint8)
            a[:8] = np.frombuffer(np.int64(i).tobytes(), np.uint8)
            a[-8:] = np.frombuffer(np.int64(int(a[:-8].sum())).tobytes(), np.uint8)
            yield {"index": i, "pixels": a}


def stamped_arrays():
    return StampedArrays(12, 1 << 20)


def _check(item):
    a = item["pixels"]
    assert int(np.frombuffer(a[:8].tobytes(), np.int64)[0]) == item["index"]
    assert int(np.frombuffer(a[-8:].tobytes(), np.int64)[0]) == int(a[:-8].sum())
    assert np.array_equal(a, next(_nth(item["index"], a.size)))


def _nth(i, size):
    for item in StampedArrays(i + 1, size):
        if item["index"] == i:
            yield item["pixels"]


def _stamped_cycle():
    """Three passes over stamped arrays in shared memory: views kept across
    every later pass, a pass abandoned with break; every byte checked each
    time a new item arrives, and after the worker is gone."""
    from feedline.pipeline import SharedMemorySegmentPool

    pool = SharedMemorySegmentPool((1 << 20) + 4096, 4, acquire_timeout=30)
    it = iterate_in_subprocess(stamped_arrays, arena=pool, buffer_size=2)
    kept = []
    for epoch in range(3):
        for item in it:
            assert isinstance(item["pixels"], np.ndarray) and not item["pixels"].flags.owndata
            _check(item)
            if epoch == 0 and item["index"] < 2:
                kept.append(item)  # held across every later pass
            if epoch == 1 and item["index"] == 5:
                break  # an abandoned pass: its queued items are freed, not lost
            for k in kept:
                _check(k)
    assert pool.free_segments() <= 4 - len(kept)
    del it, item
    gc.collect()
    for k in kept:
        _check(k)  # the views outlive the worker and its iterable
    del kept, k
    gc.collect()
    pool.close()


def test_views_in_shared_memory_never_change_while_held():
    shm = set(os.listdir("/dev/shm"))
    _stamped_cycle()  # also starts the process-wide helpers (forkserver, fd sharer)
    fds = set(os.listdir("/proc/self/fd"))
    _stamped_cycle()
    assert set(os.listdir("/dev/shm")) - shm == set()  # nothing new left behind
    assert set(os.listdir("/proc/self/fd")) <= fds


class VariedStampedArrays:
    """12 stamped arrays of 64 bytes to 1 MiB, on every pass."""

    def __iter__(self):
        for i in range(12):
            yield {"index": i, "pixels": next(_nth(i, 64 + (i * 389_017) % (1 << 20)))}


def test_copies_through_a_ring_never_change_and_nothing_is_lost():
    from feedline.pipeline import SharedMemoryRingBuffer

    # About two of the largest items: the worker keeps waiting for room.
    ring = SharedMemoryRingBuffer(2 << 20, acquire_timeout=30)
    it = iterate_in_subprocess(VariedStampedArrays, arena=ring, buffer_size=2)
    kept = []
    for epoch in range(3):
        seen = []
        for item in it:
            assert item["pixels"].flags.writeable  # a private copy
            _check(item)
            seen.append(item["index"])
            if epoch == 0:
                kept.append(item)  # copies held across every later pass
            if epoch == 1 and item["index"] == 5:
                break  # an abandoned pass: its queued items are discarded
            for k in kept:
                _check(k)
        assert seen == list(range(6 if epoch == 1 else 12))
        if epoch != 1:
            assert ring.used() == 0  # every item's bytes released
    del it
    gc.collect()
    for k in kept:
        _check(k)
    ring.close()


def test_a_killed_worker_leaves_held_views_intact():
    from feedline.pipeline import SharedMemorySegmentPool

    pool = SharedMemorySegmentPool((1 << 20) + 4096, 3, acquire_timeout=30)
    it = iterate_in_subprocess(stamped_arrays, arena=pool, buffer_size=1)
    values = iter(it)
    held = [next(values) for _ in range(3)]  # every segment held: the worker waits
    os.kill(it.pid, signal.SIGKILL)
    with pytest.raises(RuntimeError, match="exit code -9"):
        list(values)
    for item in held:
        _check(item)


@pytest.mark.parametrize("kind", ["pool", "ring"])
def test_a_spawned_worker_with_an_arena_exits_without_leak_reports(capfd, kind):
    # A spawned worker shuts its interpreter down fully, with the arena still
    # in its Process object's arguments: nanobind reported the native arena
    # (and the module) as leaked on stderr at every exit.
    from feedline.pipeline import SharedMemoryRingBuffer, SharedMemorySegmentPool

    arena = SharedMemorySegmentPool(1 << 20, 2) if kind == "pool" else SharedMemoryRingBuffer(1 << 20)
    it = iterate_in_subprocess(three_arrays, arena=arena, mp_context="spawn")
    assert [int(a[0]) for a in it] == [0, 1, 2]
    pid = it.pid
    del it
    gc.collect()
    assert process_gone(pid)
    err = capfd.readouterr().err
    assert "leaked" not in err, err


def test_arena_errors_in_the_worker_reach_the_parent_as_runtime_errors_naming_them():
    # docs/python.md: the worker writes into the arena, so a full pool (a
    # feedline.Timeout there) or a too-large item (a ValueError there) is,
    # like every failure of the worker, a RuntimeError in the parent.
    from feedline.pipeline import SharedMemorySegmentPool

    held = []
    full = SharedMemorySegmentPool(16384, 2, acquire_timeout=0)
    with pytest.raises(RuntimeError, match=r"in shared memory: Timeout: .*all 2 segments"):
        for item in iterate_in_subprocess(three_arrays, arena=full):
            held.append(item)  # the parent holds both segments
    assert [int(a[0]) for a in held] == [0, 1]
    small = SharedMemorySegmentPool(16384, 2)
    with pytest.raises(RuntimeError, match=r"in shared memory: ValueError: .*do not fit in a segment of 16384 bytes"):
        list(iterate_in_subprocess(one_large_array, arena=small))
