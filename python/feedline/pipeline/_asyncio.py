"""The asyncio side of a pipeline: one event loop thread per pipeline, started
only when the pipeline has an ``async def`` op, an async generator op or an
async source; and the adapters that run such ops on it.

Coroutine ops never block a worker thread: the worker creates the coroutine,
hands it to the loop and returns; the task's completion re-enters the engine.
Async generators and async sources are pulled one item at a time; each pull
waits on a worker thread (without the GIL) while the loop runs it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import threading

from .._feedline_ext import Cancelled

_END = object()
_POLL = 0.1  # seconds between checks that the loop still runs, while waiting on it


class LoopThread:
    """An asyncio event loop running in a daemon thread of its own."""

    def __init__(self, name: str):
        self._name = name
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closing = False
        self._lock = threading.Lock()

    def start(self) -> None:
        with self._lock:
            if self._thread is not None or self._closing:
                return  # running, or closed: a closed loop never starts
            ready = threading.Event()

            def run():
                loop = asyncio.new_event_loop()
                asyncio.set_event_loop(loop)
                self.loop = loop
                ready.set()
                try:
                    loop.run_forever()
                finally:
                    with contextlib.suppress(Exception):
                        loop.run_until_complete(loop.shutdown_asyncgens())
                    loop.close()

            # A daemon thread: the loop never keeps the interpreter from exiting.
            self._thread = threading.Thread(target=run, name=self._name, daemon=True)
            self._thread.start()
            ready.wait()

    @property
    def closing(self) -> bool:
        return self._closing

    def call_soon(self, fn, *args) -> None:
        """Runs ``fn(*args)`` on the loop. Raises RuntimeError once closed."""
        if self.loop is None or self._closing:
            raise Cancelled("the pipeline is stopping")
        self.loop.call_soon_threadsafe(fn, *args)

    def run(self, coro):
        """Runs ``coro`` on the loop and waits for its result (from another
        thread; the wait releases the GIL). Returns ``_END`` when the loop is
        closing: the pipeline is stopping and nobody wants the result."""
        if self.loop is None or self._closing:
            coro.close()
            return _END
        try:
            fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
            while True:
                try:
                    return fut.result(timeout=_POLL)
                except concurrent.futures.TimeoutError:
                    # A loop stopped under the call never completes it (a
                    # task made just after begin_close()'s cancel-all is
                    # never cancelled): the stop does not wait on it.
                    if self._closing and (self.loop.is_closed() or not self.loop.is_running()):
                        fut.cancel()
                        return _END
        except (concurrent.futures.CancelledError, RuntimeError):
            if self._closing:
                return _END
            raise

    def begin_close(self) -> None:
        """Cancels every task on the loop and refuses new work, so that the
        engine's in-flight async calls end promptly."""
        with self._lock:
            self._closing = True
            loop = self.loop
        if loop is None or loop.is_closed():
            return

        def cancel_all():
            for task in asyncio.all_tasks(loop):
                task.cancel()

        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(cancel_all)

    def close(self, timeout: float | None = None) -> None:
        """Stops the loop and joins its thread."""
        self.begin_close()
        with self._lock:
            loop, thread = self.loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(loop.stop)
        if thread is not threading.current_thread():
            thread.join(timeout)


def _finish_task(loop_thread, completion, task: asyncio.Future) -> None:
    if not completion.pending:
        return
    if task.cancelled():
        if loop_thread.closing:
            completion.emit(None)  # cancelled by stop(): not a failure
        else:
            completion.fail(Cancelled("the async call was cancelled"))
        return
    exc = task.exception()
    if exc is not None:
        completion.fail(exc)
    else:
        completion.emit(task.result())


def _start_task(loop_thread: LoopThread, coro, completion) -> None:
    if loop_thread.closing:
        coro.close()
        completion.emit(None)  # the pipeline is stopping: drop the item
        return
    loop = loop_thread.loop
    assert loop is not None, "tasks start only once the loop runs"
    task = loop.create_task(coro)
    task.add_done_callback(functools.partial(_finish_task, loop_thread, completion))


def coroutine_submit(afn, loop_thread: LoopThread):
    """The submit function of an ``async def`` op (see make_python_async_op).
    Calls that the pipeline's stop() cuts short are dropped, not failed."""

    def submit(item, completion):
        coro = afn(item)
        if loop_thread.closing:
            coro.close()
            completion.emit(None)
            return
        try:
            loop_thread.call_soon(_start_task, loop_thread, coro, completion)
        except BaseException:
            coro.close()
            if not loop_thread.closing:
                raise
            completion.emit(None)

    return submit


def _finish_future(completion, fut: concurrent.futures.Future) -> None:
    if not completion.pending:
        return
    if fut.cancelled():
        completion.fail(Cancelled("the call was cancelled"))
        return
    exc = fut.exception()
    if exc is not None:
        completion.fail(exc)
    else:
        completion.emit(fut.result())


def executor_submit(fn, executor, around=None):
    """The submit function of a sync op that runs on a user's executor.
    ``around(item)``: a context manager entered here before the call is
    submitted and exited when it completes (the stage's task hooks, which
    run in this process: a process pool could not pickle them)."""

    def submit(item, completion):
        hooks = None
        if around is not None:
            hooks = around(item)
            hooks.__enter__()
        try:
            fut = executor.submit(fn, item)
        except BaseException as e:
            if hooks is not None:
                hooks.__exit__(type(e), e, e.__traceback__)
            raise
        done = functools.partial(_finish_future, completion)
        if hooks is not None:
            done = functools.partial(_finish_hooked, hooks, done)
        fut.add_done_callback(done)

    return submit


def _finish_hooked(hooks, done, fut) -> None:
    exc = fut.exception() if not fut.cancelled() else concurrent.futures.CancelledError()
    try:
        if exc is None:
            hooks.__exit__(None, None, None)
        else:
            hooks.__exit__(type(exc), exc, exc.__traceback__)
    except BaseException as e:  # noqa: BLE001 - a hook that fails fails the call
        failed: concurrent.futures.Future = concurrent.futures.Future()
        failed.set_exception(e)
        done(failed)
        return
    done(fut)


def _materialize(gen_fn, item):
    return list(gen_fn(item))


def executor_generator(gen_fn, executor):
    """A generator op on a user's executor: the generator runs to its end
    there (a process pool cannot stream), then its items are emitted."""

    def gen(item):
        yield from executor.submit(_materialize, gen_fn, item).result()

    return gen


async def _anext(ait):
    try:
        return await ait.__anext__()
    except StopAsyncIteration:
        return _END


def async_generator(agen_fn, loop_thread: LoopThread):
    """An async generator op as a generator op: each pull runs on the loop."""

    def gen(item):
        ait = agen_fn(item).__aiter__()
        try:
            while True:
                value = loop_thread.run(_anext(ait))
                if value is _END:
                    return
                yield value
        finally:
            close = getattr(ait, "aclose", None)
            if close is not None and not loop_thread.closing:
                with contextlib.suppress(Exception):
                    loop_thread.run(close())

    return gen


class AsyncSource:
    """An async iterable as an iterable whose items are pulled on the loop."""

    def __init__(self, aiterable, loop_thread: LoopThread):
        self._aiterable = aiterable
        self._loop_thread = loop_thread

    def __iter__(self):
        ait = self._aiterable.__aiter__()
        while True:
            value = self._loop_thread.run(_anext(ait))
            if value is _END:
                return
            yield value
