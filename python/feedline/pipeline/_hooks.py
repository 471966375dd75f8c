"""Stage identity, hooks and the statistics classes of feedline.pipeline.

The engine counts everything natively and always (see ``docs/stats.md``);
the classes here present those counters the way ``spdl.pipeline`` does:

- :class:`TaskStatsHook` receives per-interval :class:`TaskPerfStats` of its
  stage (override :meth:`TaskStatsHook.interval_stats_callback` to export
  them). It is fed from the engine's counters, so it costs nothing per task.
- :class:`TaskHook` subclasses with their own ``task_hook`` run around every
  call of a Python op of their stage.
- :class:`JsonLinesWriter` appends one JSON object per report to a file.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import inspect
import io
import logging
import os
import threading
from abc import ABC, abstractmethod

_LG = logging.getLogger("feedline.pipeline")

__all__ = [
    "JsonLinesWriter",
    "QueuePerfStats",
    "StageInfo",
    "TaskHook",
    "TaskPerfStats",
    "TaskStatsHook",
]


@dataclasses.dataclass(frozen=True)
class StageInfo:
    """Identity of one stage: ``str()`` gives ``"<pipeline>:<stage>:<name>"``,
    followed by ``"[<concurrency>]"`` for concurrent pipes (``0:1:decode[8]``).
    """

    pipeline_id: int
    stage_id: int
    stage_name: str
    concurrency: int | None = None

    def __str__(self):
        s = f"{self.pipeline_id}:{self.stage_id}:{self.stage_name}"
        if self.concurrency is not None and self.concurrency > 1:
            s += f"[{self.concurrency}]"
        return s


@dataclasses.dataclass(frozen=True)
class TaskPerfStats:
    """Calls of one stage over an interval (or its whole run).

    SPDL's fields in SPDL's order (``num_tasks, num_failures, ave_time,
    p90_time, p99_time``), so positional construction means the same thing,
    then feedline's ``p50_time``. Times are in seconds. ``ave_time`` and the
    percentiles are over all calls of the interval, failed ones included
    (the engine times every call); percentiles are within 12.5%.
    """

    num_tasks: int = 0
    num_failures: int = 0
    ave_time: float = 0.0
    p90_time: float = 0.0
    p99_time: float = 0.0
    p50_time: float = 0.0


_NAN = float("nan")


@dataclasses.dataclass(frozen=True)
class QueuePerfStats:
    """The queue in front of a stage (its input) over an interval.

    SPDL's fields in SPDL's order, then feedline's ``capacity``.
    ``ave_put_time`` is the mean time the producer waited for room per item
    and ``ave_get_time`` the mean time the consumer waited for an item.
    ``occupancy_rate`` is the mean fill level (depth / capacity) over the
    interval, so 1.0 means the consumer of the queue is the bottleneck and 0.0
    means it starves.

    The engine keeps the total waits of a queue, not their distribution, so
    the stats it reports carry NaN in ``p90_put_time``, ``p99_put_time``,
    ``p90_get_time`` and ``p99_get_time`` (not measured, rather than a made-up
    figure).
    """

    elapsed: float = 0.0
    num_items: int = 0
    ave_put_time: float = 0.0
    ave_get_time: float = 0.0
    p90_put_time: float = _NAN
    p99_put_time: float = _NAN
    p90_get_time: float = _NAN
    p99_get_time: float = _NAN
    occupancy_rate: float = 0.0
    capacity: int = 0

    @property
    def qps(self) -> float:
        """Items per second through the queue."""
        return self.num_items / self.elapsed if self.elapsed > 0 else 0.0


class TaskHook(ABC):
    """Code that runs around a stage and around each of its calls.

    ``stage_hook()`` is an async context manager entered when the pipeline
    starts and exited when it ends. ``task_hook(input_item)`` is an async
    context manager around every call of a *Python* op of the stage; feedline
    drives it synchronously on the worker thread (it must not await anything
    that suspends), except around ``async def`` ops, where it runs on the
    pipeline's event loop. Stages of native ops run no task hooks: use
    :class:`TaskStatsHook` to observe them.
    """

    @contextlib.asynccontextmanager
    async def stage_hook(self):
        yield

    @abstractmethod
    def task_hook(self, input_item=None):
        """Returns an async context manager that wraps one call."""


class TaskStatsHook(TaskHook):
    """Reports a stage's :class:`TaskPerfStats` every ``interval`` seconds.

    feedline feeds this hook from the engine's counters, so it adds no cost
    per call. The default :meth:`interval_stats_callback` logs one line;
    override it to export. ``interval <= 0`` disables interval reports.
    """

    def __init__(self, info: StageInfo, interval: float = -1):
        self.info = info
        self.interval = interval

    @contextlib.asynccontextmanager
    async def task_hook(self, input_item=None):
        yield

    async def interval_stats_callback(self, stats: TaskPerfStats) -> None:
        """Called with the stats of the last interval.

        A coroutine function, as in SPDL, so that an ``async def`` override
        can ``await super().interval_stats_callback(stats)``; a plain ``def``
        override works too. The coroutine runs to completion on the
        pipeline's reporter thread before the next report.
        """
        _LG.info("[%s]\t%s", self.info, _format_task_stats(stats))


def _time_str(t: float) -> str:
    if t < 1e-4:
        return f"{t * 1e6:6.1f} [us]"
    if t < 1:
        return f"{t * 1e3:6.1f} [ms]"
    return f"{t:6.1f} [sec]"


def _format_task_stats(s: TaskPerfStats) -> str:
    return (
        f"Completed {s.num_tasks:5d} tasks ({s.num_failures:3d} failed). "
        f"Ave task time: {_time_str(s.ave_time)}. P90: {_time_str(s.p90_time)}. "
        f"P99: {_time_str(s.p99_time)}."
    )


def task_stats(stage, earlier=None) -> TaskPerfStats:
    """TaskPerfStats of an engine StageStats, since ``earlier`` if given."""
    hist = stage.op_time if earlier is None else stage.op_time.since(earlier.op_time)
    failures = stage.failures - (earlier.failures if earlier is not None else 0)
    return TaskPerfStats(
        num_tasks=hist.count,
        num_failures=failures,
        ave_time=hist.mean,
        p50_time=hist.quantile(0.5),
        p90_time=hist.quantile(0.9),
        p99_time=hist.quantile(0.99),
    )


def queue_stats(stage, earlier=None) -> QueuePerfStats:
    """QueuePerfStats of the queue in front of an engine StageStats."""
    q = stage.input_queue
    e = earlier.input_queue if earlier is not None else None
    elapsed = q.elapsed - (e.elapsed if e else 0.0)
    items = q.items_got - (e.items_got if e else 0)
    put = q.put_wait - (e.put_wait if e else 0.0)
    get = q.get_wait - (e.get_wait if e else 0.0)
    if e is None:
        occupancy = q.occupancy
    else:
        # occupancy = depth integral / (capacity * elapsed); recover the lap's.
        total = q.occupancy * q.elapsed - e.occupancy * e.elapsed
        occupancy = max(0.0, min(1.0, total / elapsed)) if elapsed > 0 else 0.0
    return QueuePerfStats(
        elapsed=elapsed,
        num_items=items,
        ave_put_time=put / items if items else 0.0,
        ave_get_time=get / items if items else 0.0,
        occupancy_rate=occupancy,
        capacity=q.capacity,
    )


class JsonLinesWriter:
    """A stats callback that appends each report as one JSON line.

    Pass it as ``build(stats_callback=JsonLinesWriter("stats.jsonl"))``: the
    file gets one line every ``report_stats_interval`` seconds and one at the
    end, each the engine's full snapshot (``PipelineStats.to_json()``; every
    counter is a total since start, durations in seconds). ``dest`` is a
    path (appended to) or a text file object (not closed).
    """

    def __init__(self, dest):
        self._lock = threading.Lock()
        if isinstance(dest, (str, os.PathLike)):
            self._file = open(dest, "a", encoding="utf-8")  # noqa: SIM115
            self._owned = True
        elif isinstance(dest, io.TextIOBase) or hasattr(dest, "write"):
            self._file = dest
            self._owned = False
        else:
            raise TypeError(f"JsonLinesWriter needs a path or a text file, got {type(dest).__name__}")

    def __call__(self, stats) -> None:
        line = stats.to_json()
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._owned and not self._file.closed:
                self._file.close()


def _run_to_completion(awaitable):
    """Runs an awaitable on an event loop made for it; returns its result.

    Reports come seconds apart, so a loop per call costs nothing that
    matters. The reporter thread runs no loop; the final report may come
    from the thread that called ``stop()``, which may be inside a coroutine
    (its loop busy, and a second loop refused there): then a short-lived
    thread runs it, and this one waits.
    """

    def run():
        loop = asyncio.new_event_loop()
        try:
            return loop.run_until_complete(awaitable)
        finally:
            loop.close()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return run()
    outcome: dict = {}

    def in_thread():
        try:
            outcome["result"] = run()
        except BaseException as e:  # re-raised in the caller
            outcome["error"] = e

    t = threading.Thread(target=in_thread, name="feedline-stats-hook")
    t.start()
    t.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("result")


def hook_interval(hook) -> float:
    """A stats hook's own reporting interval in seconds (<= 0: none)."""
    value = getattr(hook, "interval", -1)
    try:
        value = float(value)
    except (TypeError, ValueError):
        return -1.0
    return value if value > 0 and value != float("inf") else -1.0


# The engine's snapshots come no more often than this, whatever a hook asks.
MIN_SNAPSHOT_PERIOD = 0.01


def snapshot_period(report_interval: float, hook_intervals) -> float:
    """The engine's snapshot period for these intervals: the smallest
    positive one (at least MIN_SNAPSHOT_PERIOD); -1 when none is positive."""
    positive = [i for i in (report_interval, *hook_intervals) if i > 0]
    return max(min(positive), MIN_SNAPSHOT_PERIOD) if positive else -1.0


class _Schedule:
    """When a periodic report is due, on the pipeline's elapsed time.

    Targets are ``interval, 2 * interval, ...`` from the start, so a report
    that came one snapshot late does not push the later ones back; ``slack``
    absorbs the jitter of snapshots that land a hair early.
    """

    __slots__ = ("interval", "next_due", "slack")

    def __init__(self, interval: float, slack: float):
        self.interval = interval
        self.next_due = interval
        self.slack = slack

    def due(self, elapsed: float) -> bool:
        if self.interval <= 0 or elapsed + self.slack < self.next_due:
            return False
        while self.next_due <= elapsed + self.slack:
            self.next_due += self.interval
        return True


class _HookState:
    """A stats hook (or StatsQueue), its schedule, and its stage as of its
    last report."""

    __slots__ = ("base", "base_reporting", "hook", "schedule")

    def __init__(self, hook, slack: float):
        self.hook = hook
        self.schedule = _Schedule(hook_interval(hook), slack)
        self.base = None  # StageStats of the last report; None: the start
        self.base_reporting = None  # a region's worker count at that report


class StatsDispatcher:
    """Turns the engine's periodic snapshots into hook calls and log lines.

    The engine calls it (with the GIL, on its reporter thread) every
    ``period`` seconds (see :func:`snapshot_period`) and once at the end with
    a PipelineStats snapshot. Each TaskStatsHook reports at its own
    ``interval`` what its stage did since its previous report; the log
    lines and ``user_callback`` follow ``interval`` (the pipeline's
    ``report_stats_interval``). At the end every hook gets what its reports
    did not cover yet, and the logger the stats table.
    """

    def __init__(self, infos, hooks, user_callback, interval, on_end, region_hook_factory=None, period=None, queues=()):
        self._infos = infos  # StageInfo per engine stage, in engine order
        if period is None:
            intervals = [hook_interval(h) for hs in hooks for h in hs] + [hook_interval(q) for _, q in queues]
            period = snapshot_period(interval, intervals)
        self._slack = period / 4 if period > 0 else 0.0
        # per engine stage: a _HookState per TaskStatsHook
        self._hooks = [[_HookState(h, self._slack) for h in hs] for hs in hooks]
        # (engine stage, _HookState of the StatsQueue fed its input queue's counters)
        self._queues = [(i, _HookState(q, self._slack)) for i, q in queues]
        # f(RegionStats, StageStats, index) -> TaskStatsHooks of a region's
        # stage, made when its workers first report it.
        self._region_hook_factory = region_hook_factory
        self._region_hooks: dict = {}
        self._user_callback = user_callback
        self._interval = interval
        self._report = _Schedule(interval if interval > 0 else -1.0, self._slack)
        self._on_end = on_end
        self._logged = None  # the snapshot of the last log line
        self._ended = False
        self._lock = threading.Lock()

    def __call__(self, stats) -> None:
        with self._lock:
            final = all(s.finished for s in stats.stages)
            report = not final and self._report.due(stats.elapsed)
            if self._user_callback is not None and (report or final):
                self._guard(self._user_callback, stats)
            if not final or not self._ended:
                for i, stage in enumerate(stats.stages):
                    for state in self._hooks[i] if i < len(self._hooks) else ():
                        self._feed(state, stage, None, stats.elapsed, final)
                for region, i, stage, _ in _region_stages(stats, None):
                    for state in self._hooks_of(region, i, stage):
                        self._feed(state, stage, region.reporting, stats.elapsed, final)
                for i, state in self._queues:
                    if i < len(stats.stages):
                        self._feed(state, stats.stages[i], None, stats.elapsed, final, queue_stats)
            if report:
                earlier, self._logged = self._logged, stats
                if _LG.isEnabledFor(logging.INFO):
                    _LG.info("%s", self._format_lap(stats, earlier))
            if final and not self._ended:
                self._ended = True
                if _LG.isEnabledFor(logging.INFO):
                    _LG.info("pipeline finished:\n%s", stats.format_table())
                if self._on_end is not None:
                    self._guard(self._on_end)

    def _feed(self, state: _HookState, stage, reporting, elapsed: float, final: bool, measure=task_stats) -> None:
        """Reports ``measure(stage)`` since the hook's (or queue's) last
        report to it, when its interval is due or at the end."""
        if not (state.schedule.due(elapsed) or final):
            return
        # Totals from fewer workers of a region are no baseline.
        base = state.base if state.base_reporting == reporting else None
        state.base, state.base_reporting = stage, reporting
        self._guard(state.hook.interval_stats_callback, measure(stage, base))

    def _hooks_of(self, region, i, stage):
        key = (region.name, i)
        if key not in self._region_hooks:
            self._region_hooks[key] = []
            if self._region_hook_factory is not None:
                hooks = self._guard(self._region_hook_factory, region, stage, i) or []
                self._region_hooks[key] = [_HookState(h, self._slack) for h in hooks]
        return self._region_hooks[key]

    @staticmethod
    def _guard(fn, *args):
        try:
            result = fn(*args)
            if inspect.isawaitable(result):
                # An async callback (SPDL declares interval_stats_callback
                # with async def).
                result = _run_to_completion(result)
            return result
        except Exception:
            _LG.exception("a pipeline stats hook failed")
            return None

    def _format_lap(self, stats, earlier) -> str:
        lines = [f"pipeline {stats.name}: last {stats.elapsed - (earlier.elapsed if earlier else 0):.1f} s"]
        for i, stage in enumerate(stats.stages):
            prev = earlier.stages[i] if earlier is not None else None
            info = self._infos[i] if i < len(self._infos) else stage.name
            t = task_stats(stage, prev)
            line = f"  [{info}] {_format_task_stats(t)}"
            if stage.kind != "source":
                q = queue_stats(stage, prev)
                line += f" Input queue occupancy: {q.occupancy_rate:.0%}, {q.qps:.1f} items/s."
            line += _gil_lap(stage, prev, stats.elapsed - (earlier.elapsed if earlier else 0))
            lines.append(line)
            for region, _, rstage, rprev in _region_stages(stats, earlier, host=i):
                t = task_stats(rstage, rprev)
                q = queue_stats(rstage, rprev)
                lines.append(
                    f"  [{region.name}/{rstage.name}] {_format_task_stats(t)}"
                    f" Input queue occupancy: {q.occupancy_rate:.0%}, {q.qps:.1f} items/s."
                )
        b = stats.bottleneck()
        if b.kind != "none":
            lines.append(f"  bottleneck so far: {b.stage_name or '-'} ({b.kind}): {b.advice}")
        return "\n".join(lines)


def _gil_lap(stage, prev, elapsed) -> str:
    """The GIL part of a stage's lap line: the mean wait to take it and the
    share of the lap it was held, when the stage took it in the lap."""
    taken = stage.gil_acquisitions - (prev.gil_acquisitions if prev is not None else 0)
    if taken <= 0:
        return ""
    wait = stage.gil_wait - (prev.gil_wait if prev is not None else 0)
    held = stage.gil_held - (prev.gil_held if prev is not None else 0)
    share = held / elapsed if elapsed > 0 else 0.0
    return f" GIL: waited {wait / taken * 1e3:.3f} ms per call, held {share:.0%}."


def _region_stages(stats, earlier, host=None):
    """(region, index, stage, the same stage in ``earlier`` or None) of every
    region stage of ``stats`` (of regions hosted by stage ``host``)."""
    before = {r.name: r for r in earlier.regions} if earlier is not None else {}
    for region in stats.regions:
        if host is not None and region.host_stage != host:
            continue
        prev = before.get(region.name)
        # Totals from fewer workers are no baseline for an interval.
        earlier_stages = prev.stages if prev is not None and prev.reporting == region.reporting else []
        for i, stage in enumerate(region.stages):
            yield region, i, stage, earlier_stages[i] if i < len(earlier_stages) else None


# ---------------------------------------------------------------------------
# Running TaskHook context managers around Python ops.

_END = object()


def run_sync(coro):
    """Runs a coroutine that never suspends to its end and returns its value."""
    try:
        coro.send(None)
    except StopIteration as e:
        return e.value
    coro.close()
    raise RuntimeError(
        "a pipeline hook awaited something that suspends; feedline runs the "
        "hooks of sync ops synchronously on the worker thread"
    )


class _SyncTaskHooks:
    """Enters each hook's ``task_hook(item)`` around one call, synchronously."""

    __slots__ = ("_hooks", "_item", "_stack")

    def __init__(self, hooks, item):
        self._hooks = hooks
        self._item = item
        self._stack = contextlib.AsyncExitStack()

    def __enter__(self):
        run_sync(self._stack.__aenter__())
        try:
            for hook in self._hooks:
                run_sync(self._stack.enter_async_context(hook.task_hook(self._item)))
        except BaseException as e:
            run_sync(self._stack.__aexit__(type(e), e, e.__traceback__))
            raise

    def __exit__(self, *exc):
        return run_sync(self._stack.__aexit__(*exc))


def hooks_around(hooks):
    """``around(item)``: the context manager of ``hooks`` for one call
    that another thread or process makes (see _asyncio.executor_submit)."""
    return functools.partial(_SyncTaskHooks, hooks)


def hooked_map(fn, hooks):
    def call(item):
        with _SyncTaskHooks(hooks, item):
            return fn(item)

    return call


def hooked_generator(gen_fn, hooks):
    def gen(item):
        it = iter(gen_fn(item))
        while True:
            # A hook that suppresses the op's exception ends the item's
            # outputs (the generator is done): without this, the pull would
            # give the last output again, or no value at all.
            value = _END
            with _SyncTaskHooks(hooks, item):
                value = next(it, _END)
            if value is _END:
                return
            yield value

    return gen


def hooked_coroutine(afn, hooks):
    async def call(item):
        async with contextlib.AsyncExitStack() as stack:
            for hook in hooks:
                await stack.enter_async_context(hook.task_hook(item))
            return await afn(item)

    return call


class StageHooks:
    """Enters every hook's ``stage_hook()`` at start and exits them at the end."""

    def __init__(self, hooks):
        self._hooks = hooks
        self._stack = None
        self._lock = threading.Lock()

    def enter(self):
        if not self._hooks:
            return
        stack = contextlib.AsyncExitStack()
        run_sync(stack.__aenter__())
        try:
            for hook in self._hooks:
                cm = hook.stage_hook()
                if not hasattr(cm, "__aenter__"):
                    raise ValueError(f"{type(hook).__name__}.stage_hook() must return an async context manager")
                run_sync(stack.enter_async_context(cm))
        except BaseException as e:
            run_sync(stack.__aexit__(type(e), e, e.__traceback__))
            raise
        self._stack = stack

    def exit(self):
        with self._lock:
            stack, self._stack = self._stack, None
        if stack is not None:
            run_sync(stack.__aexit__(None, None, None))
