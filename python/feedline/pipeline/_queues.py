"""``create_task``, ``AsyncQueue`` and ``StatsQueue``: SPDL's asyncio helpers.

feedline's inter-stage queues are native (and always measured), so these
classes serve two purposes:

- In asyncio code of one's own (a custom merge op, a background task), they
  work as in SPDL: :class:`AsyncQueue` is an ``asyncio.Queue`` with a
  ``stage_hook()``; :class:`StatsQueue` times every ``put``/``get`` and
  reports :class:`QueuePerfStats` every ``interval`` seconds (while its
  ``stage_hook()`` is entered) and at its end.
- As ``build_pipeline(queue_class=...)`` or
  ``config.set_default_queue_class(...)``, a :class:`StatsQueue` subclass is
  made once per native queue and fed the engine's counters of that queue
  (see ``StatsDispatcher``), as TaskStatsHook is; no item passes through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from ._hooks import QueuePerfStats, StageInfo, _time_str

__all__ = ["AsyncQueue", "StatsQueue", "create_task"]

_LG = logging.getLogger("feedline.pipeline")

T = TypeVar("T")


# ---------------------------------------------------------------------------
# create_task


class _RepeatedErrors:
    """How many failed tasks raised at each place (file, line, function)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._counts: dict = {}

    def count(self, where) -> int:
        with self._lock:
            n = self._counts.get(where, 0) + 1
            self._counts[where] = n
            return n


_repeated = _RepeatedErrors()


def _where(exc: BaseException) -> tuple:
    """The innermost frame of ``exc``'s traceback: (file, line, function)."""
    tb = exc.__traceback__
    if tb is None:
        return ("<unknown>", 0, "")
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    return (code.co_filename, tb.tb_lineno, code.co_name)


def _log_done(task, log_cancelled, suppress, threshold, warning_interval) -> None:
    if task.cancelled():
        if log_cancelled:
            _LG.warning("Task [%s] was cancelled.", task.get_name())
        return
    exc = task.exception()
    if exc is None:
        return
    if suppress:
        where = _where(exc)
        n = _repeated.count(where)
        place = f"{where[0]}:{where[1]}:{where[2]}"
        if n == threshold:
            _LG.warning(
                "Task [%s] failed at %s %d times; not logging further failures there.", task.get_name(), place, n
            )
            return
        if n > threshold:
            if warning_interval > 0 and n % warning_interval == 0:
                _LG.warning("%d tasks have failed at %s (failures there are not logged).", n, place)
            return
    _LG.error("Task [%s] failed.", task.get_name(), exc_info=exc)


def create_task(
    coro: Coroutine[Any, Any, T],
    name: str | None = None,
    log_cancelled: bool = False,
    suppress_repeated_logs: bool = False,
    suppression_threshold: int = 5,
    suppression_warning_interval: int = 100,
) -> asyncio.Task[T]:
    """``asyncio.create_task(coro, name=name)``, whose failure is logged.

    When the task ends with an exception, the ``feedline.pipeline`` logger
    gets ``Task [<name>] failed.`` at ERROR with the traceback (the task's
    result still raises it for whoever awaits it). ``log_cancelled``: log a
    WARNING when the task is cancelled. ``suppress_repeated_logs``: count
    failures by the place (file, line, function) that raised them; the
    ``suppression_threshold``-th failure at one place logs a WARNING instead,
    later ones there are not logged, except a WARNING with the count at every
    ``suppression_warning_interval``-th.

    Must be called from a coroutine (or with an event loop running).
    """
    task = asyncio.create_task(coro, name=name)
    task.add_done_callback(
        lambda t: _log_done(
            t, log_cancelled, suppress_repeated_logs, suppression_threshold, suppression_warning_interval
        )
    )
    return task


# ---------------------------------------------------------------------------
# Queues


class AsyncQueue(asyncio.Queue):
    """An ``asyncio.Queue`` of ``buffer_size`` items that knows its stage.

    ``stage_hook()`` is an async context manager around the stage's life
    (it does nothing here; :class:`StatsQueue` measures within it).
    """

    def __init__(self, info: StageInfo, *, buffer_size: int = 1) -> None:
        super().__init__(maxsize=buffer_size)
        self.info = info

    @contextlib.asynccontextmanager
    async def stage_hook(self):
        yield


class _Counters:
    """What a StatsQueue measured up to a moment (totals since its start)."""

    __slots__ = ("fill", "get_wait", "items", "put_wait", "t")

    def __init__(self, t=0.0, items=0, put_wait=0.0, get_wait=0.0, fill=0.0):
        self.t, self.items, self.put_wait, self.get_wait, self.fill = t, items, put_wait, get_wait, fill


class StatsQueue(AsyncQueue):
    """An :class:`AsyncQueue` that reports :class:`QueuePerfStats`.

    Used directly (asyncio code of one's own), it times every ``put`` (the
    wait for room) and ``get`` (the wait for an item), counts the items got
    and the queue's mean fill (``occupancy_rate``: mean depth / maxsize; for
    an unbounded queue the share of the time it held an item). While
    ``stage_hook()`` is entered it calls :meth:`interval_stats_callback` every
    ``interval`` seconds (if ``interval > 0``) with what happened since the
    previous call, and at its exit logs the totals. It keeps means, not
    distributions: the put/get percentiles are NaN.

    Given to ``build_pipeline`` as ``queue_class`` (or set with
    ``config.set_default_queue_class``), one instance is made per native
    queue of the pipeline and fed the engine's counters of that queue at its
    ``interval`` and once at the end (what its reports did not cover yet),
    as a TaskStatsHook is; see docs/python.md.
    """

    def __init__(self, info: StageInfo, *, buffer_size: int = 1, interval: float = -1) -> None:
        super().__init__(info, buffer_size=buffer_size)
        self.interval = interval
        self._fed_by_engine = False  # set by build_pipeline: nothing passes through
        self._start: float | None = None
        self._now = _Counters()
        self._last_change = 0.0

    # -- measuring (direct use) ------------------------------------------------

    def _advance(self) -> float:
        """Integrates the fill since the last change; returns the time."""
        now = time.monotonic()
        if self._start is None:
            self._start = self._last_change = now
        dt = now - self._last_change
        depth = self.qsize()
        if self.maxsize > 0:
            self._now.fill += dt * depth / self.maxsize
        elif depth > 0:
            self._now.fill += dt
        self._last_change = now
        return now

    async def put(self, item) -> None:
        t0 = self._advance()
        await super().put(item)
        self._now.put_wait += self._advance() - t0

    async def get(self):
        t0 = self._advance()
        item = await super().get()  # counted by get_nowait, which it calls
        self._now.get_wait += self._advance() - t0
        return item

    def put_nowait(self, item) -> None:
        self._advance()
        super().put_nowait(item)

    def get_nowait(self):
        self._advance()
        item = super().get_nowait()
        self._now.items += 1
        return item

    def _snapshot(self) -> _Counters:
        now = self._advance()
        c = self._now
        return _Counters(now - (self._start or now), c.items, c.put_wait, c.get_wait, c.fill)

    @staticmethod
    def _stats(now: _Counters, before: _Counters | None) -> QueuePerfStats:
        b = before or _Counters()
        elapsed = now.t - b.t
        items = now.items - b.items
        return QueuePerfStats(
            elapsed=elapsed,
            num_items=items,
            ave_put_time=(now.put_wait - b.put_wait) / items if items else 0.0,
            ave_get_time=(now.get_wait - b.get_wait) / items if items else 0.0,
            occupancy_rate=max(0.0, min(1.0, (now.fill - b.fill) / elapsed)) if elapsed > 0 else 0.0,
        )

    @contextlib.asynccontextmanager
    async def stage_hook(self):
        if self._fed_by_engine:
            yield
            return
        start = self._snapshot()
        reporter = None
        if self.interval > 0:
            reporter = asyncio.create_task(self._report_periodically(start), name=f"{self.info}_queue_stats")
        try:
            yield
        finally:
            if reporter is not None:
                reporter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reporter
            _LG.info("[%s_queue]\t%s", self.info, _format_queue_stats(self._stats(self._snapshot(), None)))

    async def _report_periodically(self, before: _Counters) -> None:
        loop = asyncio.get_running_loop()
        target = loop.time()
        while True:
            target += self.interval
            await asyncio.sleep(max(0.0, target - loop.time()))  # a timer, not synchronisation
            now = self._snapshot()
            try:
                await self.interval_stats_callback(self._stats(now, before))
            except Exception:
                _LG.exception("a queue's interval_stats_callback failed")
            before = now

    async def interval_stats_callback(self, stats: QueuePerfStats) -> None:
        """Called with the stats of the last interval; logs one line.

        A coroutine function, as in SPDL (a plain ``def`` override works
        too when the engine feeds the queue). Override it to export.
        """
        _LG.info("[%s_queue]\t%s", self.info, _format_queue_stats(stats))


def _format_queue_stats(s: QueuePerfStats) -> str:
    line = (
        f"Processed {s.num_items:5d} items in {_time_str(s.elapsed)} (QPS: {s.qps:6.1f}). "
        f"Ave wait time: put: {_time_str(s.ave_put_time)}, get (by next stage): {_time_str(s.ave_get_time)}."
    )
    for q, put, get in ((90, s.p90_put_time, s.p90_get_time), (99, s.p99_put_time, s.p99_get_time)):
        if put == put and get == get:  # not NaN: measured
            line += f" P{q}: put: {_time_str(put)}, get: {_time_str(get)}."
    return line + f" Occupancy rate: {s.occupancy_rate:.0%}"
