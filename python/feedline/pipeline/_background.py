"""Background tasks: coroutines that run beside a pipeline.

SPDL's names and behaviour: ``build_pipeline(..., background_tasks=[f, ...])``
(and ``config.set_default_background_tasks``) takes factories, each a
callable that returns a :class:`BackgroundTask` (a subclass works as its own
factory). When the pipeline starts, each factory is called and the task's
``run()`` coroutine starts on the pipeline's event loop thread; when the
pipeline ends (its last item is delivered, it fails, or it is stopped) the
tasks still running are cancelled and awaited for a bounded time. A task's
exception is logged ("Background task failed: ...") and never fails the
pipeline; nor does a factory that raises.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

__all__ = ["BackgroundTask", "BackgroundTaskFactory"]

_LG = logging.getLogger("feedline.pipeline")

# How long the end of a pipeline waits for its cancelled tasks to finish.
_CANCEL_WAIT = 5.0


class BackgroundTask(ABC):
    """A coroutine that runs while its pipeline runs (override :meth:`run`)."""

    @abstractmethod
    async def run(self) -> None:
        """Runs until done or cancelled (at the end of the pipeline)."""


BackgroundTaskFactory = Callable[[], BackgroundTask]


def _log_outcome(name: str, fut: concurrent.futures.Future) -> None:
    if fut.cancelled():
        return
    error = fut.exception()
    if error is not None and not isinstance(error, asyncio.CancelledError):
        _LG.error("Background task failed: %s: %s: %s", name, type(error).__name__, error)


class BackgroundTasks:
    """The background tasks of one pipeline, as a stage hook: started when
    the pipeline's hooks are entered, cancelled when they are exited."""

    def __init__(self, factories: Sequence[BackgroundTaskFactory], loop_thread):
        self._factories = list(factories)
        self._loop_thread = loop_thread
        # Each task's future, and the asyncio task once it runs.
        self._futures: list[tuple[concurrent.futures.Future, list]] = []

    def __bool__(self) -> bool:
        return bool(self._factories)

    @contextlib.asynccontextmanager
    async def stage_hook(self):
        # Run synchronously by StageHooks: nothing here may suspend.
        self._start()
        try:
            yield
        finally:
            self._cancel()

    def _start(self) -> None:
        self._loop_thread.start()
        loop = self._loop_thread.loop
        for factory in self._factories:
            try:
                task = factory()
                coro = task.run()
            except Exception as e:  # noqa: BLE001 (a factory's error is only logged)
                _LG.error("Background task factory failed: %r: %s: %s", factory, type(e).__name__, e)
                continue
            name = type(task).__name__
            running: list = []

            async def run(coro=coro, running=running):
                running.append(asyncio.current_task())
                return await coro

            fut = asyncio.run_coroutine_threadsafe(run(), loop)
            fut.add_done_callback(functools.partial(_log_outcome, name))
            self._futures.append((fut, running))

    def _cancel(self) -> None:
        """Cancels the tasks still running and waits (a bounded time) for
        them to finish, so that their cleanup runs before the pipeline ends."""
        futures, self._futures = self._futures, []
        loop = self._loop_thread.loop
        for fut, running in futures:
            if running:
                with contextlib.suppress(RuntimeError):  # the loop has closed
                    loop.call_soon_threadsafe(running[0].cancel)
            else:
                fut.cancel()
        if futures:
            concurrent.futures.wait([fut for fut, _ in futures], timeout=_CANCEL_WAIT)
