"""Placement regions: ``PipelineBuilder.to(ProcessPoolExecutorConfig(...))``
runs the stages up to the next ``to(MAIN_PROCESS)`` in worker processes.

At build time each region (a maximal span of stages under a worker target)
becomes two stages of the main pipeline: a bridge (an aggregate stage) that
hands each item to the pool and emits the results that have come back, and
a disaggregate that splits those lists into items. Every worker runs the
region's stages as a warm pipeline of its own, with a continuous source
reading the worker's input queue, so the intermediate values never leave the
worker (and need not pickle); only the region's inputs and outputs cross.

The protocol, per worker (every value as its pickle, made by the sender
before it queues the message, so that a value that does not pickle is an
error there, never a value the queue's feeder thread drops): inputs
``("item", value)``, ``("items", [value, ...])`` (values that gathered while every worker's queue was full), ``("epoch",)`` (end of
an epoch: the worker's pipeline flushes its aggregates and the worker answers
``("epoch_done", index)`` after its last value of the epoch), ``("shutdown",)``
(which a full queue may not take: stopping also sets a flag in shared memory
that every worker reads between items, so a stop never waits behind them);
outputs ``("ready", index)``, ``("item", value)``, ``("epoch_done", index)``,
``("stats", index, record)`` (the worker's counters of the region's stages,
every second or ``report_stats_interval`` and before each ``epoch_done``;
the main pipeline's ``stats()`` lists them as ``regions``),
``("error", index, text)``. Items go to whichever worker's queue has room,
trying the workers in turn. At the end of each epoch (the main pipeline's, or
the end of its stream) the bridge sends every worker ``("epoch",)`` and waits
for all of them, so an epoch's results never cross into the next.

Outputs come in completion order across workers, so ``output_order="input"``
is refused inside a region. The bridge emits what has come back whenever an
item arrives, and the rest at the end of each epoch.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import itertools
import logging
import multiprocessing
import os
import pickle
import queue
import signal
import sys
import threading
import time
import weakref
from fractions import Fraction
from typing import Any

from ._subprocess import _close_write_end, _dumps, _own, _Receiver
from .defs import (
    Aggregator,
    ExecutorConfig,
    InterpreterPoolExecutorConfig,
    PathVariantsConfig,
    PipeConfig,
    PlacementConfig,
    ProcessPoolExecutorConfig,
    _MainProcess,
    _map_stages,
)

_LG = logging.getLogger("feedline.pipeline")
_POLL = 0.05  # seconds between checks while the bridge waits on a queue
_PUT_WAIT = 0.002  # seconds the bridge waits for room before it looks at results again
_JOIN = 3.0
# The most items the bridge gathers into one message while every worker is
# busy. Small: the last messages of an epoch may land on one worker.
_OUTBOX = 8
_STATS_PERIOD = 1.0  # seconds between a worker's reports without report_stats_interval


@dataclasses.dataclass(frozen=True)
class Region:
    """A fused span of stages that runs in a worker pool."""

    name: str
    target: ExecutorConfig
    stages: tuple
    defined_at: str | None = None


# -- validation and fusion ------------------------------------------------------------


def _ordered_stages(stages):
    for _, s in _numbered_stages(stages):
        if isinstance(s, PipeConfig):
            yield s


def _numbered_stages(stages, counter=None):
    """(index, config) of every stage in ``stages`` as a worker's pipeline
    numbers them in its statistics (its source is 0): one stage a config,
    and for a PathVariants its router, its paths' stages, then its merge
    (config None)."""
    counter = itertools.count(1) if counter is None else counter
    for s in stages:
        yield next(counter), s
        if isinstance(s, PathVariantsConfig):
            for path in s.paths:
                yield from _numbered_stages(path, counter)
            yield next(counter), None


def fuse(pipes) -> list:
    """``pipes`` with each region replaced by a :class:`Region`, after
    checking the regions; the same list when there is no placement."""
    if not any(isinstance(p, PlacementConfig) for p in pipes):
        return list(pipes)
    out: list = []
    target: ExecutorConfig | None = None  # the open region's target
    span: list = []
    where = None
    count = 0

    def close():
        nonlocal count
        if not span:
            raise ValueError(f"the region opened by to({target!r}) has no stages")
        for s in _ordered_stages(span):
            if s.output_order == "input":
                raise ValueError(
                    f'stage {s.name!r} has output_order="input", which a region cannot keep: its workers '
                    "finish items in any order"
                )
            if s.executor is not None:
                raise ValueError(f"stage {s.name!r} has an executor; a stage in a region runs in the region's workers")
        assert target is not None
        out.append(Region(f"region{count}", target, tuple(span), where))
        count += 1

    for p in pipes:
        if not isinstance(p, PlacementConfig):
            (span if target is not None else out).append(p)
            continue
        if target is not None:
            close()
        if isinstance(p.target, _MainProcess):
            target, span = None, []
            continue
        if isinstance(p.target, InterpreterPoolExecutorConfig) and sys.version_info < (3, 14):
            raise RuntimeError("InterpreterPoolExecutorConfig needs Python 3.14 or later (subinterpreters)")
        target, span, where = p.target, [], p.defined_at
    if target is not None:
        raise ValueError(f"the region opened by to({target!r}) must be closed with `to(MAIN_PROCESS)`")
    return out


def _num_threads(stages) -> int:
    total = 0
    for s in stages:
        if isinstance(s, PipeConfig):
            total += s.concurrency
        elif isinstance(s, PathVariantsConfig):
            total += sum(_num_threads(path) for path in s.paths)
    return max(1, total)


# -- the worker ---------------------------------------------------------------------


class _Inbox:
    """The source of a worker's pipeline: one pass per epoch, reading the
    worker's input queue until ``("epoch",)``; after ``("shutdown",)`` or
    the pool's ``stopping`` flag every pass waits for ``released`` and is
    empty."""

    def __init__(self, inq, stopping):
        self.inq = inq
        self.stopping = stopping  # a shared byte, set by _stop_pool
        self.closed = False
        self.released = threading.Event()

    def __iter__(self):
        if self.closed:  # the engine's next pass, after the shutdown
            self.released.wait()
            return
        while not self.stopping.value:
            try:
                msg = self.inq.get(timeout=0.1)
            except queue.Empty:
                continue
            if msg[0] == "item":
                yield pickle.loads(msg[1])
            elif msg[0] == "items":
                for blob in msg[1]:
                    if self.stopping.value:
                        break
                    yield pickle.loads(blob)
            elif msg[0] == "epoch":
                return
            else:
                break
        self.closed = True


class _CallHooks:
    """A worker's task_hook_factory: the main pipeline's, less its
    TaskStatsHooks (those run in the main process, fed by the counters the
    worker reports)."""

    def __init__(self, factory):
        self.factory = factory

    def __call__(self, info):
        from ._hooks import TaskStatsHook

        return [h for h in self.factory(info) if not isinstance(h, TaskStatsHook)]


def _no_hooks(info):
    return []


def _worker_hooks(name, factory, mp_context):
    """The task_hook_factory of a region's workers. A factory that cannot
    reach a spawned or forkserver worker (it does not pickle) leaves the
    region's stages without per-call hooks, and says so."""
    if factory is None:
        return _no_hooks
    hooks = _CallHooks(factory)
    if mp_context != "fork":
        try:
            pickle.dumps(hooks)
        except Exception as e:  # noqa: BLE001 - any pickling failure
            _LG.warning(
                "%s: task_hook_factory does not pickle (%s), so its per-call TaskHooks do not run in the "
                "region's workers (its TaskStatsHooks do run, in this process); pass mp_context='fork' or a "
                "factory defined at module level",
                name,
                e,
            )
            return _no_hooks
    return hooks


def _stats_record(pipeline, epochs: int = 0) -> bytes:
    """The counters of the region's own stages in a worker's pipeline (not
    its inbox source or its sink), as a record for the main process, once
    every one of them has counted its ``epochs``-th epoch marker. A stage
    counts a marker just after passing it on (and every item before it
    before that), so the consumer can see an epoch end a moment before the
    counts do; this waits out that moment (at most 0.2 s)."""
    from .._feedline_ext import encode_stage_stats

    deadline = time.monotonic() + 0.2
    while True:
        stages = pipeline.stats().stages[1:-1]
        if all(s.epochs >= epochs for s in stages) or time.monotonic() > deadline:
            return encode_stage_stats(stages)
        time.sleep(0.0002)


def _report_stats(index, pipeline, outq, period, done) -> None:
    """Sends the worker's counters every ``period`` seconds until ``done``.
    A full queue drops a report: the next one holds the same totals and more."""
    while not done.wait(period):
        with contextlib.suppress(Exception):
            outq.put_nowait(("stats", index, _stats_record(pipeline)))


def _worker_main(index, stages, build_kwargs, target, inq, outq, stopping) -> None:
    from ._build import build_pipeline
    from ._subprocess import _describe, _watch_parent
    from .defs import PipelineConfig, SinkConfig, SourceConfig

    # Ctrl-C at a terminal signals the whole process group: the main process
    # gets its KeyboardInterrupt and stops the workers, which must not fail
    # the region first (the user would get a PipelineFailure instead).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _watch_parent()
    inbox = _Inbox(inq, stopping)
    # The main process reports the region's stages (its stats, hooks and log
    # lines); the worker only sends it its counters.
    interval = build_kwargs.get("report_stats_interval", -1)
    build_kwargs = dict(build_kwargs, report_stats_interval=-1)
    done = threading.Event()
    try:
        if target.initializer is not None:
            target.initializer(*target.initargs)
        config = PipelineConfig(SourceConfig(inbox, continuous=True), list(stages), SinkConfig(2))
        pipeline = build_pipeline(config, **build_kwargs)
        pipeline.start()
    except BaseException as e:  # noqa: BLE001 - relayed to the main process
        outq.put(("error", index, f"the region's worker {index} failed to start: {_describe(e)}"))
        return
    reporter = threading.Thread(
        target=_report_stats,
        args=(index, pipeline, outq, interval if interval > 0 else _STATS_PERIOD, done),
        name="feedline-region-stats",
        daemon=True,
    )
    reporter.start()
    outq.put(("ready", index))
    try:
        epochs = 0
        while True:
            for value in pipeline.get_iterator():
                if stopping.value:  # the main process reads no more
                    break
                try:
                    blob = _dumps(value)
                except Exception as e:
                    raise TypeError(
                        "the region's last stage returned a value that does not pickle, so it cannot reach "
                        f"the main process ({type(e).__name__}: {e})"
                    ) from e
                outq.put(("item", blob))
            if inbox.closed or stopping.value:
                break
            # Every value of the epoch has been sent: so are its counts.
            epochs += 1
            outq.put(("stats", index, _stats_record(pipeline, epochs)))
            outq.put(("epoch_done", index))
    except BaseException as e:  # noqa: BLE001 - relayed to the main process
        outq.put(("error", index, f"the region failed in worker {index}: {_describe(e)}"))
    finally:
        done.set()
        inbox.closed = True
        inbox.released.set()
        with contextlib.suppress(BaseException):
            pipeline.stop(timeout=10)
        reporter.join()


# -- the main side ------------------------------------------------------------------


def _stop_pool(procs, inqs, outq, receiver, stopping, owner) -> None:
    """Stops the workers (shutdown, then terminate, then kill); does nothing
    in a process other than ``owner``, which started them (a forked child)."""
    if os.getpid() != owner:
        return
    stopping.value = 1
    for q in inqs:
        with contextlib.suppress(Exception):
            q.put_nowait(("shutdown",))
    deadline = time.monotonic() + _JOIN
    for escalate in (None, "terminate", "kill"):
        for p in procs:
            if escalate is not None and p.exitcode is None and p.pid is not None:
                getattr(p, escalate)()
        while any(p.exitcode is None and p.pid is not None for p in procs) and time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                while True:
                    receiver.get()
            for p in procs:
                if p.pid is not None:
                    p.join(_POLL / len(procs))
        if all(p.exitcode is not None or p.pid is None for p in procs):
            break
        deadline = time.monotonic() + _JOIN
    from ._subprocess import _release

    for i, p in enumerate(procs):
        _release(p, [inqs[i]], [outq] if i == 0 else [])


def _without_rate(stage):
    """``stage`` with a rate budget (a ``Fraction``) made unlimited: a
    worker's pipeline would hold it against the worker's calls only (too
    few for its probation, or one worker's bad luck). The main process
    holds rates over the calls of all the workers instead."""
    if isinstance(stage, PipeConfig) and isinstance(stage.max_failures, Fraction):
        return dataclasses.replace(stage, max_failures=-1)
    return stage


class _Budgets:
    """The failure budgets of a region's stages, held against the failures
    and calls of all its workers together: a stage's own budget against its
    counts, the pipeline-wide one against the totals of the region's stages
    without their own (as one pipeline counts them). Each worker's pipeline
    holds count budgets against its own calls as well, which can only trip
    later than the region's check (one worker's failures are at most all
    of them) but trips at once, without waiting for a counters report."""

    def __init__(self, stages, default):
        from ._build import _budget

        # Keyed by the stage's index in a worker's statistics, not by name:
        # two stages may share a name and not a budget.
        self.own: dict[int, Any] = {}  # stage index -> (max_failures, its FailureBudget)
        self.shared: set[int] = set()  # the stages under the pipeline-wide budget
        for index, s in _numbered_stages(stages):
            if not isinstance(s, PipeConfig):
                continue
            if s.max_failures is None:
                self.shared.add(index)
            else:
                self.own[index] = (s.max_failures, _budget(s.max_failures))
        self.default = (default, _budget(default))
        limited = [v for v, _ in self.own.values()] + ([default] if self.shared else [])
        self.active = any(isinstance(v, Fraction) or v >= 0 for v in limited)

    def check(self, region: str, workers: int, stages) -> None:
        """RuntimeError when a budget is exceeded, given the region's
        statistics ``stages`` (summed over its workers)."""
        failures = calls = 0
        for stage in stages:
            # Statistics name a stage "<index>:<name>".
            prefix = stage.name.partition(":")[0]
            if not prefix.isdigit():
                continue
            key = int(prefix)
            if key in self.own:
                value, budget = self.own[key]
                if budget.exceeded(stage.failures, stage.calls):
                    raise RuntimeError(
                        f"{region}: stage {stage.name!r} failed {stage.failures} of {stage.calls} calls in the "
                        f"region's {workers} workers, which exceeds its max_failures={value}"
                    )
            elif key in self.shared:
                failures += stage.failures
                calls += stage.calls
        value, budget = self.default
        if self.shared and budget.exceeded(failures, calls):
            raise RuntimeError(
                f"{region}: the region's stages without their own budget failed {failures} of {calls} calls in "
                f"its {workers} workers, which exceeds the pipeline-wide max_failures={value}"
            )


class RegionPool:
    """The worker processes of one region and their queues."""

    def __init__(self, region: Region, build_kwargs: dict, host_stage: int = 0, hook_factory=None):
        target = region.target
        self.host_stage = host_stage  # the bridge's index in the main pipeline
        self._native: Any = None  # a weak reference to the main pipeline
        if not isinstance(target, ProcessPoolExecutorConfig):
            raise RuntimeError(f"{type(target).__name__} is not supported on Python {sys.version.split()[0]}")
        self.name = region.name
        self.size = target.max_workers or os.cpu_count() or 1
        ctx: Any = multiprocessing.get_context(target.mp_context or "forkserver")
        depth = max(2, 4 // self.size)
        self._inqs = [ctx.Queue(maxsize=depth) for _ in range(self.size)]
        self._outq = ctx.Queue(maxsize=max(4, 2 * self.size))
        self._stopping = ctx.RawValue("b", 0)
        self._receiver = _Receiver(self._outq)
        # One thread more than the stages' concurrency: the source waits on
        # the input queue on a thread of the pool.
        default = build_kwargs.get("max_failures", -1)
        kwargs = dict(
            build_kwargs,
            max_failures=-1 if isinstance(default, Fraction) else default,
            num_threads=_num_threads(region.stages) + 1,
            task_hook_factory=_worker_hooks(region.name, hook_factory, target.mp_context),
        )
        self._procs = [
            _own(
                ctx.Process(
                    target=_worker_main,
                    args=(
                        i,
                        _map_stages(region.stages, _without_rate),
                        kwargs,
                        target,
                        self._inqs[i],
                        self._outq,
                        self._stopping,
                    ),
                    name=f"feedline-{region.name}-{i}",
                    daemon=True,
                )
            )
            for i in range(self.size)
        ]
        self._finalizer = weakref.finalize(
            self, _stop_pool, self._procs, self._inqs, self._outq, self._receiver, self._stopping, os.getpid()
        )
        self._budgets = _Budgets(region.stages, default)
        self._pending: collections.deque = collections.deque()
        self._outbox: list = []  # items no worker's queue had room for yet
        self._epoch_done = 0
        self._next = 0
        self._started = False
        self._closing = False

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        try:
            for p in self._procs:
                p.start()
            _close_write_end(self._outq)
        except (pickle.PicklingError, TypeError, AttributeError) as e:
            self.close()
            raise TypeError(
                f"{self.name}: the region's stages and initializer must pickle to reach its worker processes "
                f"({e}); pass ProcessPoolExecutorConfig(mp_context='fork') to fork them instead"
            ) from e
        ready = 0
        while ready < self.size:
            msg = self._get()
            if msg[0] == "ready":
                ready += 1
            else:
                self._message(msg)

    def close(self) -> None:
        self._closing = True
        self._finalizer()

    def attach(self, native) -> None:
        """The main pipeline (native), which gets the workers' counters."""
        self._native = weakref.ref(native)

    def _report(self, worker: int, record: bytes) -> None:
        native = self._native() if self._native is not None else None
        if native is None:
            return
        try:
            native.report_region(self.name, self.host_stage, worker, self.size, record)
        except Exception:  # a damaged record costs its statistics only
            _LG.exception("%s: worker %d sent counters that do not decode", self.name, worker)
            return
        if not self._budgets.active:
            return
        for region in native.stats().regions:
            if region.name == self.name:
                self._budgets.check(self.name, self.size, region.stages)

    def _get(self):
        """The next message from a worker; RuntimeError when a worker died."""
        while True:
            try:
                return self._receiver.get(timeout=_POLL)
            except queue.Empty:
                self._check_workers()
            except (EOFError, OSError):  # every worker has gone (or is going), maybe mid-message
                for p in self._procs:
                    p.join(_POLL / self.size)
                self._check_workers()

    def _message(self, msg) -> None:
        kind = msg[0]
        if kind == "item":
            self._pending.append(pickle.loads(msg[1]))
        elif kind == "epoch_done":
            self._epoch_done += 1
        elif kind == "stats":
            self._report(msg[1], msg[2])
        elif kind == "error":
            self.close()
            raise RuntimeError(f"{self.name}: {msg[2]}")

    def _drain(self) -> None:
        while True:
            try:
                msg = self._receiver.get()
            except (queue.Empty, EOFError, OSError):  # _get tells a worker's death
                return
            self._message(msg)

    def _put_in_turn(self, msg) -> bool:
        """Puts ``msg`` into the first worker's queue in turn that has room;
        False when none has."""
        for k in range(self.size):
            i = (self._next + k) % self.size
            try:
                self._inqs[i].put_nowait(msg)
            except queue.Full:
                continue
            self._next = (i + 1) % self.size
            return True
        return False

    def _send(self, msg, worker: int | None = None) -> None:
        """Puts ``msg`` into a worker's queue (``worker``, or the first of
        them in turn that has room), taking results in while all are full."""
        while True:
            if worker is None:
                if self._put_in_turn(msg):
                    return
            else:
                with contextlib.suppress(queue.Full):
                    self._inqs[worker].put_nowait(msg)
                    return
            # Every queue is full: take in the results that have come back,
            # then wait (briefly, to look at the results again) for room in
            # the queue next in turn. A worker may hold items back, in an
            # aggregate, and send nothing until it gets more.
            self._drain()
            i = self._next if worker is None else worker
            try:
                self._inqs[i].put(msg, timeout=_PUT_WAIT)
            except queue.Full:
                self._check_workers()
                continue
            if worker is None:
                self._next = (i + 1) % self.size
            return

    def _check_workers(self) -> None:
        """RuntimeError when a worker died, after taking in its last words
        (an ``("error", ...)`` it sent raises that instead)."""
        for i, p in enumerate(self._procs):
            if p.exitcode is not None and not self._closing:
                self._drain()
                raise RuntimeError(f"{self.name}: worker {i} (pid {p.pid}) died with exit code {p.exitcode}")

    def _check_open(self) -> None:
        if self._closing:
            raise RuntimeError(f"{self.name}: the region's workers are stopped")
        self.start()

    def _try_send_outbox(self) -> bool:
        """Puts the outbox, as one message, into the first worker's queue in
        turn that has room; False when none has."""
        msg = ("items", self._outbox) if len(self._outbox) > 1 else ("item", self._outbox[0])
        if not self._put_in_turn(msg):
            return False
        self._outbox = []
        return True

    def _flush_outbox(self) -> None:
        if self._outbox and not self._try_send_outbox():
            self._send(("items", self._outbox))
            self._outbox = []

    def put(self, item) -> list:
        self._check_open()
        # Pickled here, so that an item that does not pickle is an error
        # (which ends the pipeline, as every failure of a region does); the
        # queue would pickle it in its feeder thread, print the error and
        # drop it.
        try:
            blob = _dumps(item)
        except Exception as e:
            raise TypeError(
                f"{self.name}: an item does not pickle, so it cannot reach the region's workers "
                f"({type(e).__name__}: {e})"
            ) from e
        # While every worker's queue is full, items gather in the outbox and
        # go as one message when a queue has room: fewer messages (and
        # wake-ups) per item exactly when the workers are the bottleneck. A
        # full outbox waits for room.
        self._outbox.append(blob)
        if not self._try_send_outbox() and len(self._outbox) >= _OUTBOX:
            self._flush_outbox()
        self._drain()
        out = list(self._pending)
        self._pending.clear()
        return out

    def end_epoch(self) -> list:
        self._check_open()
        self._flush_outbox()
        for i in range(self.size):
            self._send(("epoch",), worker=i)
        while self._epoch_done < self.size:
            self._message(self._get())
        self._epoch_done = 0
        out = list(self._pending)
        self._pending.clear()
        return out


class RegionBridge(Aggregator):
    """The main pipeline's stage for a region (see the module docstring)."""

    def __init__(self, pool: RegionPool):
        self.pool = pool

    def accumulate(self, item):
        return self.pool.put(item) or None

    def flush(self):
        return self.pool.end_epoch() or None

    def stage_hook(self):
        """Starts the pool with the pipeline and stops it at its end."""
        pool = self.pool

        @contextlib.asynccontextmanager
        async def running():
            pool.start()  # errors (a stage that does not pickle) surface at start()
            try:
                yield
            finally:
                pool.close()

        return running()
