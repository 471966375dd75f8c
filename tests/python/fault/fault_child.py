"""One case of the fault matrix (test_fault_matrix.py), in its own process.

    python fault_child.py FAULT ORDER CONCURRENCY KIND REPS

Runs the scenario FAULT ``REPS`` times on a pipeline

    Python source (ints 0..N-1) -> op under test (CONCURRENCY, ORDER)
    -> pass-through (concurrency 2, ORDER) -> sink

where KIND says whether both ops are Python functions or native ops of the
test extension (``_feedline_testing``: ``fail_on_multiple``, ``gate``,
``spin``, ``add``). Every repetition checks the accounting: no item twice, no
item that was not produced, what the consumer got is what the statistics
say was delivered, no stage emits more than it took in, and for runs that
end normally, delivered + failed == produced exactly.

After a warm-up repetition and again after the last one it takes a
snapshot of the process (Python threads, OS threads, pool threads, open
fds, /dev/shm entries and mappings, RSS) and prints both as the last line
of stdout, ``RESULT {json}``; the test compares them. The ``exit_*`` faults
then leave pipelines in that state and let the interpreter exit.

Synchronisation is by events, pipes and the pipeline's own state flags;
the test's timeout is only a guard.
"""

from __future__ import annotations

import atexit
import faulthandler
import gc
import json
import os
import signal
import sys
import threading
import time

import _feedline_testing as testing

from feedline import _feedline_ext
from feedline.pipeline import PipelineBuilder, PipelineFailure

N = 48  # items per run
HANG_AT = 5  # the item a hanging op blocks on
TAKE = 3  # items the consumer reads before stopping or abandoning
# Bound of every wait for the pipeline's progress: a guard, never reached in
# a passing run (each wait is for work of microseconds to milliseconds).
DEADLINE = 10.0


def wait_until(predicate, what):
    deadline = time.monotonic() + DEADLINE
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        os.sched_yield()


_GATES = []  # every gate made, released when a scenario fails
_PID = os.getpid()  # a forked child's SystemExit must not release them


class Gate:
    """Makes the op under test block on item ``value`` until released.

    Python: the op waits on an Event. Native: ``testing.gate`` blocks in
    read() on a pipe (without the GIL), after writing one byte to another
    pipe that ``wait_entered`` reads.
    """

    def __init__(self, kind, value=HANG_AT):
        self.kind = kind
        self.value = value
        self.closed = False
        _GATES.append(self)
        if kind == "py":
            self._entered = threading.Event()
            self._release = threading.Event()
        else:
            self._release_r, self._release_w = os.pipe()
            self._entered_r, self._entered_w = os.pipe()

    def op(self):
        if self.kind == "native":
            return testing.gate(self._release_r, self.value, self._entered_w)
        entered, release, value = self._entered, self._release, self.value

        def gate(x):
            if x == value:
                entered.set()
                release.wait()
            return x

        return gate

    def wait_entered(self):
        if self.kind == "py":
            assert self._entered.wait(DEADLINE), "the op never reached the gate"
        else:
            assert os.read(self._entered_r, 1) == b"\0"

    def release(self):
        if self.kind == "py":
            self._release.set()
        elif not self.closed:
            os.write(self._release_w, b"x")

    def close(self):
        """Closes the pipes (call once the pipeline has stopped)."""
        _GATES.remove(self)
        self.closed = True
        if self.kind == "native":
            for fd in (self._release_r, self._release_w, self._entered_r, self._entered_w):
                os.close(fd)


def failing_op(kind):
    """The op that fails on some items, and the set of items it fails on."""
    if kind == "native":
        return testing.fail_on_multiple(7), {x for x in range(N) if x % 7 == 0}

    def fail(x):
        if x % 7 == 3:
            raise ValueError(f"item {x} is bad")
        return x

    return fail, {x for x in range(N) if x % 7 == 3}


def slow_op(kind):
    if kind == "native":
        return testing.spin(200)

    def slow(x):
        end = time.perf_counter() + (1 + x % 4) * 1e-4  # busy work, uneven
        while time.perf_counter() < end:
            pass
        return x

    return slow


def passthrough(kind):
    return testing.add(0) if kind == "native" else (lambda x: x)


class Run:
    """One pipeline of the case: its source's count and its consumer's."""

    def __init__(self, case, op, *, source_fails_at=None, n=N):
        self.case = case
        self.produced = []
        self.delivered = []

        def source():
            for i in range(n):
                if i == source_fails_at:
                    raise RuntimeError(f"source failed at item {i}")
                self.produced.append(i)
                yield i

        self.pipeline = (
            PipelineBuilder()
            .add_source(source())
            .pipe(op, concurrency=case.conc, output_order=case.order, max_failures=-1)
            .pipe(passthrough(case.kind), concurrency=2, output_order=case.order)
            .add_sink(2)
            .build(num_threads=case.conc + 1)
        )

    def take(self, k):
        for _ in range(k):
            try:
                self.delivered.append(self.pipeline.get_item(timeout=DEADLINE))
            except TimeoutError:
                stats = self.pipeline.stats().format_table()
                raise AssertionError(f"items that were ready never reached the consumer:\n{stats}") from None

    def drain(self, iterator=None):
        for x in iterator if iterator is not None else self.pipeline:
            self.delivered.append(x)

    def check(self, stats=None, *, failed=frozenset(), exact=True, running=False):
        """The accounting of a finished (exact) or stopped run; ``running``:
        ``stats`` were taken while the source still ran."""
        stats = stats if stats is not None else self.pipeline.stats()
        d = self.delivered
        assert len(set(d)) == len(d), f"an item was delivered twice: {sorted(d)}"
        assert set(d) <= set(self.produced), f"delivered items never produced: {set(d) - set(self.produced)}"
        assert stats.items_delivered == len(d), (stats.items_delivered, len(d))
        src, op, pas = stats.stages[0], stats.stages[1], stats.stages[2]
        if running:
            assert src.items_out <= len(self.produced), (src.items_out, len(self.produced))
        else:
            assert src.items_out == len(self.produced), (src.items_out, len(self.produced))
        for s in (op, pas):
            assert s.items_out + s.failures + s.items_skipped <= s.items_in, s
        if exact:
            assert op.failures == len(failed), (op.failures, sorted(failed))
            assert sorted(d) == sorted(set(self.produced) - set(failed)), sorted(d)
            assert len(d) + op.failures == len(self.produced)
            if self.case.order == "input":
                assert d == sorted(d), d


# -- the faults ------------------------------------------------------------


def op_raises(case):
    op, failed = failing_op(case.kind)
    r = Run(case, op)
    with r.pipeline.auto_stop():
        r.drain()
    r.check(failed=failed)


def op_hangs_released(case):
    gate = Gate(case.kind)
    r = Run(case, gate.op())

    def release():
        gate.wait_entered()
        gate.release()

    t = threading.Thread(target=release)
    t.start()
    with r.pipeline.auto_stop():
        r.drain()
    t.join()
    gate.close()
    r.check()


def op_hangs_stop_times_out(case):
    gate = Gate(case.kind)
    r = Run(case, gate.op())
    r.pipeline.start()
    gate.wait_entered()
    r.take(TAKE)
    try:
        r.pipeline.stop(timeout=0.05)
        raise AssertionError("stop() returned while an op was blocked")
    except TimeoutError:
        pass
    gate.release()
    r.pipeline.stop()  # completes once the call returns
    gate.close()
    expect_eof(r.pipeline)
    r.check(exact=False)


def op_slow(case):
    r = Run(case, slow_op(case.kind))
    with r.pipeline.auto_stop():
        r.drain()
    r.check()


def source_raises(case):
    r = Run(case, passthrough(case.kind), source_fails_at=N // 2)
    try:
        with r.pipeline.auto_stop():
            r.drain()
        raise AssertionError("the source's failure was not reported")
    except PipelineFailure as e:
        assert "source failed at item" in repr(e.exceptions), e
    assert r.pipeline.stats().stages[0].failed
    assert sorted(r.delivered) == r.produced == list(range(N // 2))
    r.check()


def consumer_abandons(case):
    r = Run(case, slow_op(case.kind))
    r.pipeline.start()
    it = iter(r.pipeline)
    for _ in range(TAKE):
        r.delivered.append(next(it))
    del it
    gc.collect()
    r.drain()  # a new iterator continues where the first one stopped
    r.pipeline.stop()
    r.check()


def stop_mid_stream(case):
    r = Run(case, slow_op(case.kind))
    r.pipeline.start()
    r.take(TAKE)
    r.pipeline.stop()
    expect_eof(r.pipeline)
    r.check(exact=False)


def gc_without_stop(case):
    r = Run(case, slow_op(case.kind))
    r.take(TAKE)
    stats = r.pipeline.stats()
    r.pipeline = None
    gc.collect()
    r.check(stats, exact=False, running=True)


def ctrl_c(case):
    """SIGINT while the consumer waits for an item held by a blocked op."""
    gate = Gate(case.kind)
    r = Run(case, gate.op())
    native = r.pipeline._native
    # What reaches the consumer before it must wait for the blocked item.
    before = HANG_AT if case.order == "input" or case.conc == 1 else N - 1

    stalled = []

    def interrupt():
        gate.wait_entered()
        try:
            wait_until(
                lambda: native.consumer_waiting and native.stats().items_delivered == before,
                "the consumer to wait on the blocked item",
            )
        except AssertionError:
            stalled.append(native.stats().format_table())
        os.kill(os.getpid(), signal.SIGINT)

    t = threading.Thread(target=interrupt)
    r.pipeline.start()
    t.start()
    try:
        r.drain()
        raise AssertionError("no KeyboardInterrupt")
    except KeyboardInterrupt:
        pass
    t.join()
    assert not stalled, f"items that were ready never reached the consumer:\n{stalled[0]}"
    assert len(r.delivered) == before, (len(r.delivered), before)
    gate.release()
    r.pipeline.stop()
    gate.close()
    expect_eof(r.pipeline)
    r.check(exact=False)


def fork_while_running(case):
    """os.fork() while an op is blocked; the child runs a pipeline of its own
    and exits through the interpreter's normal exit; the parent's pipeline
    then finishes with nothing lost."""
    gate = Gate(case.kind)
    r = Run(case, gate.op())
    r.pipeline.start()
    gate.wait_entered()
    sys.stdout.flush()
    sys.stderr.flush()
    # faulthandler's watchdog thread does not exist in a forked child, whose
    # exit would wait for it forever: disarm it across the fork.
    faulthandler.cancel_dump_traceback_later()
    pid = os.fork()
    if pid != 0:
        arm_watchdog()
    if pid == 0:
        child = Run(case, slow_op(case.kind), n=10)
        with child.pipeline.auto_stop():
            child.drain()
        code = 0 if sorted(child.delivered) == list(range(10)) else 3
        raise SystemExit(code)  # the interpreter's normal exit, not os._exit
    status = []
    waiter = threading.Thread(target=lambda: status.append(os.waitpid(pid, 0)[1]))
    waiter.start()
    waiter.join(DEADLINE)
    if waiter.is_alive():
        os.kill(pid, signal.SIGKILL)
        waiter.join()
        raise AssertionError("the forked child hung")
    code = os.waitstatus_to_exitcode(status[0])
    gate.release()
    assert code == 0, f"the forked child exited with {code} (negative: killed by signal {-code})"
    try:  # started above
        r.drain()
    finally:
        r.pipeline.stop()
    gate.close()
    r.check()


# Pipelines and gates of the exit_* faults, alive when the interpreter exits.
_AT_EXIT = []


def exit_running(case):
    """At exit: a pipeline mid-stream never stopped, one whose iterator was
    abandoned, and one whose source is blocked (released while the
    interpreter finalizes)."""
    busy = Run(case, slow_op(case.kind), n=10**6)
    busy.take(TAKE)
    abandoned = Run(case, slow_op(case.kind), n=10**6)
    it = iter(abandoned.pipeline)
    abandoned.delivered.append(next(it))
    held = threading.Event()
    pulled = threading.Event()

    def blocked_source():
        yield 0
        pulled.set()
        held.wait()
        yield 1

    blocked = (
        PipelineBuilder()
        .add_source(blocked_source())
        .pipe(passthrough(case.kind), concurrency=case.conc, output_order=case.order)
        .add_sink(2)
        .build(num_threads=case.conc + 1)
    )
    assert blocked.get_item(timeout=DEADLINE) == 0
    assert pulled.wait(DEADLINE)
    atexit.register(held.set)  # runs after feedline's exit hook
    _AT_EXIT.extend([busy, abandoned, it, blocked])
    for r in (busy, abandoned):
        r.check(exact=False, running=True)  # their sources still run


def exit_after_stop_timed_out(case):
    """stop(timeout=) times out on a blocked op, the program ends, and the op
    is released while the interpreter finalizes."""
    gate = Gate(case.kind)
    r = Run(case, gate.op())
    r.pipeline.start()
    gate.wait_entered()
    r.take(TAKE)
    try:
        r.pipeline.stop(timeout=0.05)
        raise AssertionError("stop() returned while an op was blocked")
    except TimeoutError:
        pass
    r.check(exact=False)
    atexit.register(gate.release)  # runs after feedline's exit hook gave up
    _AT_EXIT.extend([r, gate])


def expect_eof(pipeline):
    try:
        pipeline.get_item(timeout=DEADLINE)
    except EOFError:
        return
    raise AssertionError("a read after stop() did not raise EOFError")


FAULTS = {
    "op_raises": op_raises,
    "op_hangs_released": op_hangs_released,
    "op_hangs_stop_times_out": op_hangs_stop_times_out,
    "op_slow": op_slow,
    "source_raises": source_raises,
    "consumer_abandons": consumer_abandons,
    "stop_mid_stream": stop_mid_stream,
    "gc_without_stop": gc_without_stop,
    "ctrl_c": ctrl_c,
    "fork": fork_while_running,
    # Run once, last: the interpreter then exits with them in that state.
    "exit_running": exit_running,
    "exit_after_stop_timed_out": exit_after_stop_timed_out,
}


# -- the process's resources ---------------------------------------------


def snapshot():
    gc.collect()
    # A pipeline stopped in the background (after a timed-out stop) joins its
    # threads on the engine's stopper thread; wait for that, bounded.
    wait_until(lambda: _feedline_ext._live_pool_threads() == 0, "pool threads to end")
    with open("/proc/self/statm") as f:
        rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    with open("/proc/self/maps") as f:
        shm_maps = sum("/dev/shm/" in line for line in f)
    return {
        "py_threads": threading.active_count(),
        "os_threads": len(os.listdir("/proc/self/task")),
        "pool_threads": _feedline_ext._live_pool_threads(),
        "fds": len(os.listdir("/proc/self/fd")),
        "shm": sorted(os.listdir("/dev/shm")),
        "shm_maps": shm_maps,
        "rss": rss,
    }


class Case:
    def __init__(self, fault, order, conc, kind):
        self.fault, self.order, self.conc, self.kind = fault, order, int(conc), kind


def arm_watchdog():
    """A hung case prints every thread's Python stack and exits before the
    test's guard kills it, so that a hang seen once says where it was."""
    dump_after = float(os.environ.get("FEEDLINE_FAULT_DUMP_AFTER", "0"))
    if dump_after > 0:
        faulthandler.dump_traceback_later(dump_after, exit=True)


def main():
    fault, order, conc, kind, reps = sys.argv[1:6]
    arm_watchdog()
    # A process started in the background by a non-interactive shell
    # inherits SIGINT ignored, and Python then keeps it ignored: ctrl_c
    # would wait forever for an interrupt that never comes.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    case = Case(fault, order, conc, kind)
    scenario = FAULTS[fault]
    # How long feedline's exit hook waits for a pipeline before exiting
    # without it (10 s): shortened so that the exit_* cases, and a failed
    # case that leaves an op blocked, stay fast. What is tested, exiting
    # after that wait gave up, is the same.
    import feedline.pipeline._pipeline as pipeline_module

    pipeline_module._CLEANUP_TIMEOUT = 0.2
    first = last = None
    for i in range(int(reps)):
        try:
            if fault.startswith("exit_"):
                op_slow(case)  # the process has run pipelines before
            else:
                scenario(case)
        except BaseException:
            for gate in list(_GATES) if os.getpid() == _PID else ():  # let blocked calls return
                gate.release()
            raise
        if i == 0:
            first = snapshot()
    last = snapshot()
    if fault.startswith("exit_"):
        scenario(case)
    print("RESULT " + json.dumps({"first": first, "last": last}), flush=True)


if __name__ == "__main__":
    main()
