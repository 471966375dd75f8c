"""Iterables that run in another process: iterate_in_subprocess() and
run_pipeline_in_subprocess().

One worker process per iterable. ``fn()`` is called once in the worker to
make the iterable; each ``iter()`` in the parent starts a pass over it in the
worker, and the values come back through a bounded queue (``buffer_size``:
how far the worker may run ahead).

The protocol (all messages are tuples; ``gen`` numbers the parent's passes):

- parent -> worker (commands): ``("start", gen)``, ``("abort",)``;
- worker -> parent (data): ``("ready",)`` or ``("init_failed", text)`` once,
  then per pass ``("item", gen, value)``..., ``("done", gen)`` or
  ``("failed", gen, text)``.

A pass the consumer abandons (``break``) is not waited for: the next
``iter()`` sends a new ``start`` and drops whatever of older passes is still
queued; the worker checks its commands before every ``next()``. After a
failure in the worker, or any error in the parent other than the consumer
closing the iterator, the worker is shut down and the iterable cannot be
iterated again.

No process is left behind: the worker exits when its parent dies (it waits
on the parent's sentinel in a watchdog thread), the parent notices a dead
worker within ``_POLL`` seconds while waiting, and the iterable's finalizer
(which also runs at interpreter exit, before multiprocessing joins its
children) stops the worker: ``abort``, then terminate, then kill.
"""

from __future__ import annotations

import collections
import contextlib
import io
import logging
import multiprocessing
import multiprocessing.connection
import multiprocessing.reduction
import os
import pickle
import queue
import random
import select
import sys
import threading
import time
import traceback
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar

from ._arena import SharedMemoryRingBuffer, SharedMemorySegmentPool, restore

__all__ = ["iterate_in_subprocess", "run_pipeline_in_subprocess"]

_LG = logging.getLogger("feedline.pipeline")
T = TypeVar("T")

_POLL = 0.1  # seconds between liveness checks while waiting
_JOIN = 3.0  # seconds a worker gets to exit after "abort", then after terminate()

# The worker processes this process made (iterate_in_subprocess's and the
# regions'), forgotten by a child made with os.fork().
_workers: weakref.WeakSet = weakref.WeakSet()


def _own(process):
    """Records ``process`` as a worker of this process; returns it."""
    _workers.add(process)
    return process


def _forget_parent_workers() -> None:
    """In a child made with os.fork(): the parent's workers are not its own.
    multiprocessing lists every process it started in a set that the fork
    copies; a child that exits normally would terminate the daemonic ones
    (the parent's workers) and fail to join the others. Taking them off
    that list leaves them to the parent; their finalizers do nothing here
    (they check the pid)."""
    global _workers
    children = getattr(multiprocessing.process, "_children", None)
    if children is not None:
        for process in list(_workers):
            children.discard(process)
    _workers = weakref.WeakSet()


os.register_at_fork(after_in_child=_forget_parent_workers)


# -- worker side ------------------------------------------------------------------


def _watch_parent() -> None:
    """Exits this process when its parent dies (SIGKILL included): the
    parent's sentinel becomes ready when it is gone."""
    parent = multiprocessing.parent_process()
    if parent is None or parent.sentinel is None:
        return

    def watch():
        multiprocessing.connection.wait([parent.sentinel])
        os._exit(3)

    threading.Thread(target=watch, name="feedline-parent-watch", daemon=True).start()


def _describe(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}\n{''.join(traceback.format_exception(e))}"


class _Abort(Exception):
    pass


class _Superseded(RuntimeError):
    """An iterator used after a newer iter() of the same iterable."""


def _worker_main(fn, initializers, commands, data, sent, arena=None) -> None:
    try:
        _serve(fn, initializers, commands, data, sent, arena)
    finally:
        # A spawned worker ends with a full interpreter shutdown, through
        # which its Process object (and so the arena in its arguments)
        # lives on: the native handle goes now, not in nanobind's leak check.
        if arena is not None:
            arena.close()


def _serve(fn, initializers, commands, data, sent, arena) -> None:
    _watch_parent()
    if arena is not None:
        from ._arena import offload
    try:
        for init in initializers:
            init()
    except BaseException as e:  # noqa: BLE001 - relayed to the parent
        data.put(("init_failed", f"Initializer failed: {_describe(e)}"))
        return
    try:
        iterable = fn()
    except BaseException as e:  # noqa: BLE001 - relayed to the parent
        data.put(("init_failed", f"Failed to create the iterable: {_describe(e)}"))
        return
    data.put(("ready",))
    gen = None
    read = 0  # commands taken; `sent` counts the parent's (shared memory)
    while True:
        # The last message before a return (a failure) is flushed at exit.
        # Between items the queue is polled only when the parent has sent
        # more commands than were taken: a memory read, not a syscall, per
        # item. A command counted but not yet in the pipe is taken next time.
        cmd = None
        if gen is None:  # stand-by: wait for a pass
            cmd = commands.get()
        elif sent.value > read:
            with contextlib.suppress(queue.Empty):
                cmd = commands.get_nowait()
        if cmd is not None:
            read += 1
        if cmd is not None:
            if cmd[0] != "start":
                # Abort: exit even if the parent no longer reads what is queued.
                data.cancel_join_thread()
                return
            gen = cmd[1]
            try:
                it = iter(iterable)
            except BaseException as e:  # noqa: BLE001 - relayed to the parent
                data.put(("failed", gen, f"Failed to start a pass over the iterable: {_describe(e)}"))
                return
        try:
            value = next(it)
        except StopIteration:
            data.put(("done", gen))
            gen = None
            continue
        except BaseException as e:  # noqa: BLE001 - relayed to the parent
            data.put(("failed", gen, f"Failed to fetch the next item: {_describe(e)}"))
            return
        if arena is not None:
            try:
                value = offload(value, arena)
            except BaseException as e:  # noqa: BLE001 - relayed to the parent
                data.put(("failed", gen, f"Failed to hand the item over in shared memory: {_describe(e)}"))
                return
        else:
            # Pickled here, not in the queue's feeder thread, which would
            # print the error and drop the item: the parent would get one
            # item fewer and no error.
            try:
                value = _dumps(value)
            except BaseException as e:  # noqa: BLE001 - relayed to the parent
                data.put(("failed", gen, f"Failed to pickle the item to send it to the parent: {_describe(e)}"))
                return
        data.put(("item", gen, value))


def _dumps(value: Any) -> bytes:
    """The pickle of one item, made as a multiprocessing queue would make it
    (so that what it can send, such as descriptors, still goes)."""
    out = io.BytesIO()
    multiprocessing.reduction.ForkingPickler(out, pickle.HIGHEST_PROTOCOL).dump(value)
    return out.getvalue()


# -- parent side ------------------------------------------------------------------


def _drop(msg, arena) -> None:
    """Frees the shared-memory segment of an item message that will never
    be delivered."""
    if arena is not None and msg[0] == "item":
        from ._arena import discard

        with contextlib.suppress(Exception):
            discard(msg[2], arena)


def _stop_worker(process, commands, data, sent, arena=None, owner=None, receiver=None) -> None:
    """Stops the worker: "abort", then terminate, then kill, draining the
    data queue meanwhile so that the worker is never stuck writing to it
    (and waking it if it waits for shared memory). Does nothing in a process
    other than ``owner`` (the one that started it), such as a forked child."""
    if process.pid is None or (owner is not None and os.getpid() != owner):
        return
    if receiver is None:
        receiver = _Receiver(data)
    with contextlib.suppress(Exception):
        commands.put(("abort",))
        sent.value += 1
    if arena is not None:
        with contextlib.suppress(Exception):
            arena.shutdown()
    for escalate in (None, process.terminate, process.kill):
        if escalate is not None and process.exitcode is None:
            if escalate is process.kill:
                _LG.warning("feedline: the worker subprocess %d did not exit; killing it", process.pid)
            escalate()
        deadline = time.monotonic() + _JOIN
        while process.exitcode is None and time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                while True:
                    _drop(receiver.get(), arena)
            process.join(_POLL)
        if process.exitcode is not None:
            break
    process.join(_JOIN)
    _release(process, [commands], [data])


class _Receiver:
    """Takes the messages of a ``multiprocessing.Queue`` that only workers
    write to and only this process reads, without ever waiting inside one.

    ``Queue.get`` reads a message to its end once its first bytes are in
    the pipe: a worker killed half-way through sending one (the OOM killer,
    a terminate) left this process waiting for good for the rest, unable to
    notice the death or stop the others. This reads the pipe without
    blocking, keeps a message's bytes until the whole of it is in (a large
    one straight into its own buffer), and so can always come back to check
    on the workers. The framing is the one ``multiprocessing.connection``
    writes: a 4-byte big-endian length (-1, then 8 bytes, for 2 GiB or
    more), then the pickle.
    """

    def __init__(self, q) -> None:
        self._q = q
        self._conn = q._reader
        os.set_blocking(self._conn.fileno(), False)  # only this process reads it
        self._head = bytearray()  # read, not yet in a message's buffer
        self._body: bytearray | None = None  # the message being read
        self._have = 0  # of its bytes
        self._eof = False

    def get(self, timeout: float = 0.0) -> Any:
        """The next whole message; queue.Empty when none is in within
        ``timeout`` seconds, EOFError once every writer has gone and the
        rest of the pipe is read (a message left unfinished is dropped)."""
        deadline = None
        while True:
            msg = self._read()
            if msg is not None:
                return msg[0]
            if self._eof:
                raise EOFError("every writer of the queue has gone")
            if deadline is None:
                deadline = time.monotonic() + timeout
            if not self._conn.poll(max(0.0, deadline - time.monotonic())):
                raise queue.Empty

    def _read(self) -> tuple[Any] | None:
        """A whole message (in a 1-tuple) from what the pipe holds now, or
        None when it holds no more."""
        fd = self._conn.fileno()
        head = self._head
        while True:
            body = self._body
            if body is not None:
                if self._have == len(body):
                    self._body = None
                    with contextlib.suppress(ValueError):
                        self._q._sem.release()  # the room the writer took for it
                    return (multiprocessing.reduction.ForkingPickler.loads(body),)
                try:
                    n = os.readv(fd, [memoryview(body)[self._have :]])
                except BlockingIOError:
                    return None
                if n == 0:
                    self._eof = True
                    return None
                self._have += n
                continue
            if len(head) >= 4:
                size, start = int.from_bytes(head[:4], "big", signed=True), 4
                if size == -1 and len(head) >= 12:
                    size, start = int.from_bytes(head[4:12], "big"), 12
                if size >= 0:
                    taken = min(size, len(head) - start)
                    body = bytearray(size)
                    body[:taken] = head[start : start + taken]
                    del head[: start + taken]
                    self._body, self._have = body, taken
                    continue
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                return None
            if not chunk:
                self._eof = True
                return None
            head += chunk


def _close_write_end(q) -> None:
    """Closes this process's end for writing of a queue that only the worker
    writes to, once the worker has its own. A worker that exits half-way
    through sending an item (an abort, a crash, a terminate) then leaves
    the reader an end of file instead of a read that waits for good for the
    rest of the message."""
    with contextlib.suppress(Exception):
        q._writer.close()


def _release(process, written, read) -> None:
    """Closes what the parent holds of a stopped worker: its queues and the
    process's sentinel, so that no descriptor or thread outlives the worker.

    The feeder thread of each queue the parent wrote to closes its pipe end
    as it exits, once it has written everything put: what the worker left
    unread is read off and dropped (``_flush_input``), so a worker that died
    with a full pipe does not leave the thread, or this stop, waiting for
    good. A thread still alive after ``_JOIN`` seconds (a worker that did not
    exit) is left behind rather than waited for."""
    deadline = time.monotonic() + _JOIN
    for q in written:
        if process.pid is None or process.exitcode is not None:
            _flush_input(q, deadline)
        with contextlib.suppress(Exception):
            q.close()
        thread = getattr(q, "_thread", None)
        if thread is not None:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                q.cancel_join_thread()
    for q in read:
        with contextlib.suppress(Exception):
            q.close()
        with contextlib.suppress(Exception):
            q.cancel_join_thread()
    with contextlib.suppress(Exception):
        process.close()


def _flush_input(q, deadline: float) -> None:
    """Lets the feeder thread of a stopped worker's input queue finish.

    Items the worker left unread fill the queue's pipe, and its feeder
    thread would block writing the rest for the life of this process, with
    the pipe's two descriptors, the items and the queue's semaphores (whose
    clean-up could then run on that thread as the interpreter exits, too
    late to tell the resource tracker). With no worker left to read it, this
    reads the pipe and drops what it gets (as bytes, not messages: the
    worker may have died half-way through one) until the thread has written
    the close sentinel and exited, or until ``deadline``.
    """
    thread = getattr(q, "_thread", None)
    if thread is None or not thread.is_alive():
        return
    try:
        fd = os.dup(q._reader.fileno())  # the thread closes its own at the sentinel
    except (OSError, AttributeError):
        return
    try:
        os.set_blocking(fd, False)
        q.close()
        while thread.is_alive() and time.monotonic() < deadline:
            readable, _, _ = select.select([fd], [], [], _POLL)
            try:
                if readable and not os.read(fd, 1 << 20):
                    break  # every writer has closed: the thread is exiting
            except BlockingIOError:
                pass
        thread.join(max(0.0, deadline - time.monotonic()))
    finally:
        os.close(fd)


class _SubprocessIterable(Generic[T]):
    """The iterable iterate_in_subprocess() returns."""

    def __init__(self, fn, buffer_size, initializers, ctx, timeout, daemon, arena=None):
        self._timeout = timeout
        self._arena = arena
        self._commands = ctx.Queue()
        self._sent = ctx.Value("L", 0, lock=False)  # commands sent, for the worker
        self._data = ctx.Queue(maxsize=buffer_size)
        self._owner = os.getpid()
        self._process = _own(
            ctx.Process(
                target=_worker_main,
                args=(fn, initializers, self._commands, self._data, self._sent, arena),
                name="feedline-subprocess",
                daemon=daemon,
            )
        )
        try:
            self._process.start()
        except (pickle.PicklingError, TypeError, AttributeError) as e:
            _stop_worker(self._process, self._commands, self._data, self._sent)
            raise TypeError(
                f"iterate_in_subprocess: fn and initializers must be picklable for the "
                f"{ctx.get_start_method()!r} start method ({e}); pass mp_context='fork' to run "
                "unpicklable ones in a forked worker"
            ) from e
        self._pid = self._process.pid
        _close_write_end(self._data)
        self._receiver = _Receiver(self._data)
        self._finalizer = weakref.finalize(
            self,
            _stop_worker,
            self._process,
            self._commands,
            self._data,
            self._sent,
            arena,
            self._owner,
            self._receiver,
        )
        self._gen = 0
        # Messages of a newer pass that an older iterator took from the
        # queue before it learnt it was superseded; the newer one reads
        # them first.
        self._pending: collections.deque[Any] = collections.deque()
        self._broken: str | None = None
        self._lock = threading.Lock()
        try:
            msg = self._receive("initialize")
        except BaseException:
            self._shutdown()
            raise
        if msg[0] != "ready":
            self._shutdown()
            raise RuntimeError(f"The worker subprocess quit. {msg[1]}")

    @property
    def pid(self) -> int | None:
        """The worker's process id (feedline's addition)."""
        return self._pid

    def _shutdown(self, reason: str = "The worker process is shutdown. Cannot iterate again.") -> None:
        if self._broken is None:
            self._broken = reason
        self._finalizer()

    def _receive(self, what: str):
        """The next message from the worker; RuntimeError if it dies or
        sends nothing for ``timeout`` seconds."""
        self._check_owner()
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        while True:
            wait = _POLL if deadline is None else max(0.0, min(_POLL, deadline - time.monotonic()))
            try:
                return self._receiver.get(timeout=wait)
            except queue.Empty:
                pass
            except (EOFError, OSError):  # the worker is gone (or going), maybe mid-message
                self._process.join(_POLL)
            if self._process.exitcode is not None:
                # It may have sent its last words just before exiting.
                with contextlib.suppress(queue.Empty, EOFError, OSError):
                    return self._receiver.get(timeout=_POLL)
                raise RuntimeError(
                    f"The worker subprocess quit (exit code {self._process.exitcode}) while the parent "
                    f"waited to {what}."
                )
            if deadline is not None and time.monotonic() >= deadline:
                if what == "initialize":
                    raise RuntimeError(f"The worker subprocess did not initialize after {self._timeout} seconds.")
                raise RuntimeError(f"The worker subprocess did not produce any data for {self._timeout} seconds.")

    def _check_owner(self) -> None:
        if os.getpid() != self._owner:
            raise RuntimeError(
                "This iterable of iterate_in_subprocess belongs to the parent process (it was inherited "
                "through fork); its worker serves the parent only. Make a new one in this process."
            )

    def __iter__(self) -> Iterator[T]:
        self._check_owner()
        if self._broken is not None:
            raise RuntimeError(self._broken)
        with self._lock:
            self._gen += 1
            gen = self._gen
        self._commands.put(("start", gen))
        self._sent.value += 1
        return self._results(gen)

    def _superseded(self, gen: int) -> _Superseded:
        return _Superseded(
            f"This iterator (pass {gen}) of iterate_in_subprocess was superseded: a newer iter() "
            f"started pass {self._gen}, and the worker runs one pass at a time. Finish or drop an "
            "iterator before starting the next."
        )

    def _next_message(self):
        try:
            return self._pending.popleft()
        except IndexError:
            return self._receive("get the next item")

    def _results(self, gen: int) -> Iterator[T]:
        try:
            while True:
                if gen != self._gen:
                    raise self._superseded(gen)
                msg = self._next_message()
                if len(msg) > 1 and msg[1] > gen:  # a newer pass's: not ours to take
                    self._pending.append(msg)
                    raise self._superseded(gen)
                if len(msg) > 1 and msg[1] != gen:
                    if msg[0] == "failed":  # an abandoned pass failed: the worker is gone
                        self._shutdown()
                        raise RuntimeError(f"The worker subprocess quit during an earlier pass. {msg[2]}")
                    _drop(msg, self._arena)  # left over from an abandoned pass
                    continue
                if msg[0] == "item":
                    yield pickle.loads(msg[2]) if self._arena is None else restore(msg[2], self._arena)
                elif msg[0] == "done":
                    return
                else:  # "failed"
                    self._shutdown()
                    raise RuntimeError(f"The worker subprocess quit. {msg[2]}")
        except GeneratorExit:
            return  # the consumer stopped early: the worker stays for the next pass
        except _Superseded:
            raise  # the worker serves the newer pass
        except BaseException:
            self._shutdown()
            raise


def iterate_in_subprocess(
    fn: Callable[[], Iterable[T]],
    *,
    buffer_size: int = 3,
    initializer: Callable[[], None] | Sequence[Callable[[], None]] | None = None,
    mp_context: str | None = None,
    timeout: float | None = None,
    daemon: bool = False,
    arena=None,
) -> Iterable[T]:
    """Runs ``fn()`` in a worker process and iterates the iterable it makes.

    Each ``iter()`` of the result runs one pass of ``iter(fn())`` in the
    worker (a generator returned by ``fn`` is empty after the first pass).
    The values are pickled across; the worker runs up to ``buffer_size``
    values ahead.

    Args:
        fn: called once in the worker; returns the iterable.
        buffer_size: how many values may wait in the queue (>= 1).
        initializer: a callable, or a list of them, run in the worker first.
        mp_context: the ``multiprocessing`` start method. Default
            ``"forkserver"`` (SPDL: the platform's default, ``fork`` on
            Linux), since forking a process whose native threads run is
            unsafe; ``fn`` must then pickle.
        timeout: seconds to wait for each value (and for the start); None:
            no limit. The worker's death is noticed in any case.
        daemon: the worker is a daemon process.
        arena: a :class:`SharedMemorySegmentPool` that carries large buffers
            (bytes, NumPy arrays, tensors, Buffers) in shared memory instead
            of the pipe; the parent gets zero-copy views, which stay valid
            (their segment is not reused) for as long as anything holds
            them. Tearing the iterable down shuts the pool down. Or a
            :class:`SharedMemoryRingBuffer`, through which the parent gets
            copies of its own (items of any size up to its capacity).

    Raises:
        RuntimeError: when the worker fails to start, its initializer or
            ``fn`` fails, its iterator raises (the message has the worker's
            traceback), it dies, or it is silent for ``timeout`` seconds.
    """
    if not isinstance(buffer_size, int) or buffer_size < 1:
        raise ValueError(f"buffer_size must be an int >= 1, got {buffer_size!r}")
    if timeout is not None and timeout <= 0:
        raise ValueError(f"timeout must be > 0 or None, got {timeout!r}")
    if initializer is None:
        initializers: list = []
    elif callable(initializer):
        initializers = [initializer]
    else:
        initializers = list(initializer)
    if arena is not None and not isinstance(arena, (SharedMemorySegmentPool, SharedMemoryRingBuffer)):
        raise TypeError(
            f"arena must be a SharedMemorySegmentPool or a SharedMemoryRingBuffer, got {type(arena).__name__}"
        )
    return _SubprocessIterable(fn, buffer_size, initializers, _context(mp_context), timeout, daemon, arena)


def _context(mp_context):
    return multiprocessing.get_context("forkserver" if mp_context is None else mp_context)


# -- run_pipeline_in_subprocess ------------------------------------------------------


def _rng_states() -> list:
    """The parent's global RNG states, for the worker: Python's ``random``
    always; NumPy's legacy global RNG and torch's CPU RNG only when already
    imported (never imported for this)."""
    states: list = [("random", random.getstate())]
    np = sys.modules.get("numpy")
    if np is not None:
        states.append(("numpy", np.random.get_state()))
    torch = sys.modules.get("torch")
    if torch is not None:
        states.append(("torch", torch.get_rng_state()))
    return states


class _SetStates:
    """Sets the worker's global RNGs (by module: a pickled bound method
    would set a copy's)."""

    def __init__(self, states):
        self.states = states

    def __call__(self):
        for module, state in self.states:
            if module == "random":
                random.setstate(state)
            elif module == "numpy":
                import numpy

                numpy.random.set_state(state)
            else:
                import torch

                torch.set_rng_state(state)


class _PipelineIterable:
    """Runs in the worker: each pass iterates a pipeline built from
    ``config``: one epoch of one warm pipeline for a continuous source, a
    fresh pipeline per pass otherwise."""

    def __init__(self, config, build_kwargs):
        self.config = config
        self.build_kwargs = build_kwargs
        self.warm = None

    def __iter__(self):
        from ._build import build_pipeline

        if getattr(self.config.src, "continuous", False):
            if self.warm is None:
                self.warm = build_pipeline(self.config, **self.build_kwargs)
                self.warm.start()
            yield from self.warm.get_iterator()
            return
        pipeline = build_pipeline(self.config, **self.build_kwargs)
        with pipeline.auto_stop():
            yield from pipeline.get_iterator()


def run_pipeline_in_subprocess(
    config,
    /,
    *,
    num_threads: int,
    max_failures: int = -1,
    report_stats_interval: float = -1,
    queue_class=None,
    task_hook_factory=None,
    background_tasks=None,
    use_thread_output_queue: bool = False,
    **kwargs: Any,
) -> Iterable:
    """Builds and runs the pipeline of ``config`` in a worker process and
    iterates its output there (see :func:`iterate_in_subprocess`, which gets
    ``kwargs``: ``buffer_size``, ``initializer``, ``mp_context``,
    ``timeout``, ``daemon``, ``arena``).

    Only the sink's values cross the process boundary, so the stages'
    intermediate values need not pickle; the config does (native ops of
    ``feedline.io.ops`` pickle as their factory call). The worker starts
    from the parent's global RNG states (``random``; NumPy's legacy global
    RNG and torch's CPU RNG when imported). Each ``iter()`` is one pass: one
    epoch of a warm pipeline for a continuous source, a new pipeline
    otherwise.

    A stage's ``concurrent.futures.ThreadPoolExecutor`` or
    ``ProcessPoolExecutor`` (which do not pickle) must be fresh; the worker
    builds one like it (one per executor object, however many stages share
    it) when a stage first uses it. A process pool's processes exit with the
    worker; one without ``mp_context`` starts them with ``forkserver``. A
    daemon worker (``daemon=True``) cannot start processes, so a process
    pool or a region there is a ValueError here.
    """
    from ._builder import PipelineBuilder
    from ._portable import portable
    from .defs import PipelineConfig

    if isinstance(config, PipelineBuilder):
        warnings.warn(
            "Passing a PipelineBuilder to run_pipeline_in_subprocess is deprecated; pass builder.get_config().",
            DeprecationWarning,
            stacklevel=2,
        )
        config = config.get_config()
    if not isinstance(config, PipelineConfig):
        raise TypeError(f"config must be a PipelineConfig, got {type(config).__name__}")
    build_kwargs = {
        "num_threads": num_threads,
        "max_failures": max_failures,
        "report_stats_interval": report_stats_interval,
        "queue_class": queue_class,
        "task_hook_factory": task_hook_factory,
        "background_tasks": background_tasks,
        "use_thread_output_queue": use_thread_output_queue,
    }
    config = portable(config, bool(kwargs.get("daemon", False)))
    user = kwargs.pop("initializer", None)
    inits: list = [_SetStates(_rng_states())]
    if user is not None:
        inits.extend([user] if callable(user) else list(user))
    return iterate_in_subprocess(_PipelineFactory(config, build_kwargs), initializer=inits, **kwargs)


class _PipelineFactory:
    def __init__(self, config, build_kwargs):
        self.config = config
        self.build_kwargs = build_kwargs

    def __call__(self):
        return _PipelineIterable(self.config, self.build_kwargs)
