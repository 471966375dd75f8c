"""build_pipeline(): a PipelineConfig to a running-ready Pipeline.

This module only arranges: it classifies each op, wraps async and executor
ops, and hands the stages to the native spec builder. Everything that runs
per item runs in the engine.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import logging
import os
import threading
import warnings
from fractions import Fraction

from .._feedline_ext import FailureBudget, NativeOp, NativeSource, _PipelineSpec
from . import _asyncio, _autotune, _background, _merge, _profile, _regions, _resume, _variants
from . import config as _config
from ._autotune import Autotune
from ._hooks import (
    StageHooks,
    StageInfo,
    StatsDispatcher,
    TaskStatsHook,
    hook_interval,
    hooked_coroutine,
    hooked_generator,
    hooked_map,
    hooks_around,
    snapshot_period,
)
from ._pipeline import Pipeline
from ._queues import StatsQueue
from .defs import (
    AggregateConfig,
    Aggregator,
    Collate,
    DisaggregateConfig,
    MergeConfig,
    PathVariantsConfig,
    PipeConfig,
    PipelineConfig,
    SourceConfig,
    _call_target,
    _check_max_failures,
    _indent,
)

__all__ = ["build_pipeline"]

_LG = logging.getLogger("feedline.pipeline")

_pipeline_ids = itertools.count()
_pipeline_ids_lock = threading.Lock()


def _new_lock_after_fork():
    # Another thread may have held it at the fork; a child builds pipelines.
    global _pipeline_ids_lock
    _pipeline_ids_lock = threading.Lock()


os.register_at_fork(after_in_child=_new_lock_after_fork)


def _budget(max_failures):
    """The native FailureBudget of ``max_failures`` (None: inherit)."""
    if max_failures is None:
        return None
    if isinstance(max_failures, Fraction):
        return FailureBudget.max_rate(max_failures.numerator, max_failures.denominator)
    if max_failures < 0:
        return FailureBudget.unlimited()
    return FailureBudget.max_count(max_failures)


class _Builder:
    def __init__(self, pipeline_id, stage_id, task_hook_factory, name):
        self.pipeline_id = pipeline_id
        self.stage_id = stage_id
        self.task_hook_factory = task_hook_factory
        self.loop_thread = _asyncio.LoopThread(f"feedline_asyncio_{name}")
        self.needs_loop = False
        self.infos = []  # StageInfo of every engine stage, in engine order
        self.stats_hooks = []  # TaskStatsHook instances per engine stage
        self.stage_hooks = []  # every hook, for stage_hook()
        self.locations = []  # per engine stage: where its config was made
        self.kinds = []  # per engine stage: "source", "merge", "sink" or "" (the rest)
        self.region_kwargs: dict = {}  # build_pipeline arguments for regions' pipelines
        self.region_pools: list = []  # a RegionPool per region, in stage order

    def _new_stage(self, name, concurrency=None, where=None, kind=""):
        info = StageInfo(self.pipeline_id, self.stage_id + len(self.infos), name, concurrency)
        self.locations.append(where)
        self.kinds.append(kind)
        hooks = list(self.task_hook_factory(info)) if self.task_hook_factory is not None else []
        self.infos.append(info)
        self.stats_hooks.append([h for h in hooks if isinstance(h, TaskStatsHook)])
        self.stage_hooks.extend(hooks)
        # Hooks that are not stats hooks run around each call.
        return [h for h in hooks if not isinstance(h, TaskStatsHook)]

    def spec(self, config: PipelineConfig, with_sink: bool, stoppers=()) -> _PipelineSpec:
        """The engine spec of ``config``. ``stoppers``: the EarlyStop of
        every custom merge op this pipeline feeds (its sources obey them)."""
        spec = _PipelineSpec()
        src = config.src
        if isinstance(src, MergeConfig):
            inputs = []
            stopper = _merge.EarlyStop() if src.op is not None else None
            inner = (*stoppers, stopper) if stopper is not None else stoppers
            for i, c in enumerate(src.pipeline_configs):
                sub = self.spec(c, with_sink=False, stoppers=inner)
                if stopper is not None:  # tag each item with its input; EOF at its end
                    self._new_stage(f"{src.name}_input{i}", where=src.defined_at)
                    sub.add_aggregate(_merge.InputEnd(i), False, f"{src.name}_input{i}", None)
                inputs.append(sub)
            self._new_stage(src.name, where=src.defined_at, kind="merge")
            spec.set_merge(inputs, src.name)
            if stopper is not None:
                self._custom_merge_op(spec, src, len(inputs), stopper)
        elif isinstance(src, SourceConfig):
            self._new_stage("src", where=src.defined_at, kind="source")
            source = src.source
            if not isinstance(source, NativeSource) and not hasattr(source, "__iter__"):
                self.needs_loop = True
                source = _asyncio.AsyncSource(source, self.loop_thread)
            if stoppers and not isinstance(source, NativeSource):
                source = _merge.StoppableSource(source, stoppers)
            spec.set_source(source, "src", src.continuous)
        else:
            raise TypeError(f"src must be a SourceConfig or MergeConfig, got {type(src).__name__}")
        for stage in _regions.fuse(config.pipes):
            self._add(spec, stage, ())
        if with_sink:
            if config.sink is None:
                raise ValueError("the pipeline has no sink (call add_sink())")
            self._new_stage("sink", kind="sink")
            spec.set_sink(config.sink.buffer_size)
        return spec

    def _custom_merge_op(self, spec, src: MergeConfig, num_inputs: int, stopper):
        """The stages that run a custom merge op after the engine's merge of
        the tagged inputs (see _merge)."""
        self.needs_loop = True
        info = self._peek_info(f"{src.name}_op")
        self._new_stage(info.stage_name, where=src.defined_at)
        agg = _merge.CustomMergeAggregator(src.op, info, num_inputs, self.loop_thread, stopper)
        # The op's errors end the pipeline, as a failing merge does.
        spec.add_aggregate(agg, False, info.stage_name, FailureBudget.max_count(0))
        self._new_stage(f"{src.name}_out", where=src.defined_at)
        spec.add_disaggregate(f"{src.name}_out")

    def stats_queues(self, factory, sink_buffer_size) -> list:
        """(engine stage, queue object) for the queue in front of each stage
        but sources: ``factory(info, buffer_size)`` with the StageInfo of the
        stage that fills it (SPDL names a queue after its producer), except
        in front of a merge (several producers) and the sink (what the
        consumer reads: SPDL's sink queue), which take their own. The
        buffer size is SPDL's: 2 between stages, the sink's buffer_size."""
        queues = []
        for i, kind in enumerate(self.kinds):
            if kind == "source":
                continue
            info = self.infos[i] if kind in ("merge", "sink") or i == 0 else self.infos[i - 1]
            size = sink_buffer_size if kind == "sink" else 2
            queues.append((i, factory(info, size)))
        return queues

    def region_stats_hooks(self, region, stage, index) -> list:
        """The TaskStatsHook instances of a region's stage (its StatsHooks
        run in this process, fed by the counters the workers report)."""
        if self.task_hook_factory is None:
            return []
        host = self.stage_id + region.host_stage
        info = StageInfo(self.pipeline_id, host, f"{region.name}/{stage.name}", stage.concurrency)
        return [h for h in self.task_hook_factory(info) if isinstance(h, TaskStatsHook)]

    def _peek_info(self, name, concurrency=None):
        return StageInfo(self.pipeline_id, self.stage_id + len(self.infos), name, concurrency)

    def _add_region(self, spec, region: _regions.Region):
        """A region: a bridge to its worker pool, and a stage that splits
        the lists of results the bridge emits (see _regions)."""
        pool = _regions.RegionPool(
            region, self.region_kwargs, host_stage=len(self.infos), hook_factory=self.task_hook_factory
        )
        bridge = _regions.RegionBridge(pool)
        self.region_pools.append(pool)
        self._new_stage(region.name, where=region.defined_at)
        # A failing region (a worker that dies, a worker's pipeline that
        # fails) ends the pipeline.
        spec.add_aggregate(bridge, False, region.name, FailureBudget.max_count(0))
        self._new_stage(f"{region.name}_out", where=region.defined_at)
        spec.add_disaggregate(f"{region.name}_out")
        self.stage_hooks.append(bridge)

    def _add(self, spec, stage, scope):
        if isinstance(stage, _regions.Region):
            self._add_region(spec, stage)
        elif isinstance(stage, PipeConfig):
            self._add_pipe(spec, stage, scope)
        elif isinstance(stage, PathVariantsConfig):
            self._add_path_variants(spec, stage, scope)
        elif isinstance(stage, AggregateConfig):
            task_hooks = self._new_stage(stage.name, where=stage.defined_at)
            agg: Aggregator
            if scope:
                # Hooks wrap the path's own items only.
                agg = Collate(stage.op) if isinstance(stage.op, int) else stage.op
                if task_hooks:
                    agg = _HookedAggregator(agg, task_hooks)
                spec.add_aggregate(_variants.ScopedAggregator(agg, scope), stage.drop_last, stage.name, None)
            elif isinstance(stage.op, Aggregator):
                agg = stage.op
                if task_hooks:
                    agg = _HookedAggregator(agg, task_hooks)
                spec.add_aggregate(agg, stage.drop_last, stage.name, None)
            else:
                spec.add_aggregate(stage.op, stage.drop_last, stage.name, None)
        elif isinstance(stage, DisaggregateConfig):
            self._new_stage(stage.name, where=stage.defined_at)
            if scope:
                spec.add_pipe("generator", _variants.scoped_disaggregate(scope), stage.name, 1, False, None)
            else:
                spec.add_disaggregate(stage.name)
        else:
            raise TypeError(f"unknown stage config {type(stage).__name__}")

    def _add_path_variants(self, spec, pv: PathVariantsConfig, scope):
        n = len(pv.paths)
        if _variants.in_batched_path(scope):
            raise ValueError(f"{pv.name}: a PathVariants cannot be nested inside a batched path")
        # The router's errors (and bad indices) fail the pipeline, as in SPDL.
        fatal = FailureBudget.max_count(0)
        route = _variants.router_op(pv.router, n, pv.name, pv.batched)
        self._new_stage(pv.name, where=pv.defined_at)
        if inspect.iscoroutinefunction(route):
            self.needs_loop = True
            spec.add_pipe("async", self._async_submit(route, scope), pv.name, 1, False, fatal)
        else:
            spec.add_pipe("map", _variants.scoped_map(route, scope) if scope else route, pv.name, 1, False, fatal)
        for i, path in enumerate(pv.paths):
            step = ("p", i) if pv.batched else ("r", i)
            for stage in path:
                if pv.batched and not self._one_to_one(stage):
                    raise ValueError(
                        f"{pv.name}: stage {stage!r} of batched path {i} must take one list and "
                        "return one list (a Pipe of a plain or async function)"
                    )
                self._add(spec, stage, (*scope, step))
        self._new_stage(f"{pv.name}_merge", where=pv.defined_at)
        spec.add_pipe("map", _variants.merge_op(pv.batched, scope), f"{pv.name}_merge", 1, False, None)

    @staticmethod
    def _one_to_one(stage) -> bool:
        if not isinstance(stage, PipeConfig) or isinstance(stage.op, NativeOp):
            return False
        t = _call_target(stage.op)
        return not (inspect.isgeneratorfunction(t) or inspect.isasyncgenfunction(t))

    def _async_submit(self, afn, scope):
        submit = _asyncio.coroutine_submit(afn, self.loop_thread)
        return _variants.scoped_submit(submit, scope) if scope else submit

    def _add_pipe(self, spec, cfg: PipeConfig, scope=()):
        task_hooks = self._new_stage(cfg.name, cfg.concurrency, where=cfg.defined_at)
        args = (cfg.name, cfg.concurrency, cfg.output_order == "input", _budget(cfg.max_failures))
        op = cfg.op
        if isinstance(op, NativeOp):
            if scope:
                raise ValueError(
                    f"stage '{cfg.name}' runs a native op, which cannot run inside a PathVariants "
                    "path; wrap it in a Python function or apply it before or after the PathVariants"
                )
            if task_hooks:
                raise ValueError(
                    f"stage '{cfg.name}' runs a native op, which runs no per-call task hooks; "
                    "return only TaskStatsHook instances from task_hook_factory for it"
                )
            spec.add_pipe("native", op, *args)
            return
        target = _call_target(op)
        if inspect.iscoroutinefunction(target):
            self.needs_loop = True
            if task_hooks:
                op = hooked_coroutine(op, task_hooks)
            spec.add_pipe("async", self._async_submit(op, scope), *args)
        elif inspect.isasyncgenfunction(target):
            self.needs_loop = True
            gen = _asyncio.async_generator(op, self.loop_thread)
            if task_hooks:
                gen = hooked_generator(gen, task_hooks)
            if scope:
                gen = _variants.scoped_generator(gen, scope)
            spec.add_pipe("generator", gen, *args)
        elif inspect.isgeneratorfunction(target):
            gen = op
            if cfg.executor is not None:
                gen = _asyncio.executor_generator(gen, cfg.executor)
            if task_hooks:
                gen = hooked_generator(gen, task_hooks)
            if scope:
                gen = _variants.scoped_generator(gen, scope)
            spec.add_pipe("generator", gen, *args)
        else:
            if cfg.executor is not None:
                # The hooks run in this process around the executor's call: a
                # process pool could not pickle them, and their counts are here.
                around = hooks_around(task_hooks) if task_hooks else None
                submit = _asyncio.executor_submit(op, cfg.executor, around)
                spec.add_pipe("async", _variants.scoped_submit(submit, scope) if scope else submit, *args)
            else:
                if task_hooks:
                    op = hooked_map(op, task_hooks)
                spec.add_pipe("map", _variants.scoped_map(op, scope) if scope else op, *args)


class _DefaultHooks:
    """``cls(info, interval=interval)`` per stage (a class, so that it
    pickles into a region's workers when ``cls`` does)."""

    def __init__(self, cls, interval):
        self.cls, self.interval = cls, interval

    def __call__(self, info):
        return [self.cls(info, interval=self.interval)]


def _default_hook_factory(interval):
    cls = _config.get_default_hook_class()
    if cls is None or cls is TaskStatsHook:
        return None  # the engine's statistics are TaskStatsHook's
    return _DefaultHooks(cls, interval)


def _stats_queue_class(cls):
    """Whether ``cls`` makes StatsQueues (a subclass, or a functools.partial
    of one, as SPDL code passes to set an interval)."""
    target = cls.func if isinstance(cls, functools.partial) else cls
    return isinstance(target, type) and issubclass(target, StatsQueue)


def _queue_factory(queue_class, report_stats_interval):
    """``f(info, buffer_size)`` making the StatsQueue fed each native queue's
    counters, or None. As in SPDL, an explicit ``queue_class`` is called
    without an interval, the default class with ``report_stats_interval``.
    Other queue classes cannot take the place of the native queues: ignored
    with a warning."""
    if queue_class is not None:
        make = functools.partial(_fed_queue, queue_class)
    elif _config.get_default_queue_class() is not None:
        queue_class = _config.get_default_queue_class()
        make = functools.partial(_fed_queue, queue_class, interval=report_stats_interval)
    else:
        return None
    if _stats_queue_class(queue_class) or not isinstance(queue_class, type):
        return make  # a factory function: what it makes is checked
    _ignore_queue_class(queue_class, stacklevel=4)
    return None


def _ignore_queue_class(queue_class, stacklevel) -> None:
    warnings.warn(
        f"feedline's queues are native; queue_class is ignored ({getattr(queue_class, '__name__', queue_class)!r} "
        "is not a StatsQueue, whose subclasses are fed the native queues' counters)",
        RuntimeWarning,
        stacklevel=stacklevel,
    )


def _fed_queue(cls, info, buffer_size, **kwargs):
    queue = cls(info, buffer_size=buffer_size, **kwargs)
    if isinstance(queue, StatsQueue):
        queue._fed_by_engine = True  # its stage_hook() measures nothing itself
    return queue


def _add_note(exc: BaseException, note: str) -> None:
    if hasattr(exc, "add_note"):
        exc.add_note(note)
    else:  # Python 3.10 (PEP 678 by hand)
        notes = getattr(exc, "__notes__", None)
        with contextlib.suppress(AttributeError):
            exc.__notes__ = [*(notes or []), note]  # type: ignore[attr-defined]


def _stage_lines(stages, indent):
    for stage in stages:
        where = f"  (defined at {stage.defined_at})" if stage.defined_at else ""
        yield f"{indent}- {stage!r}{where}"
        if isinstance(stage, PathVariantsConfig):
            for i, path in enumerate(stage.paths):
                yield f"{indent}  path{i}:"
                yield from _stage_lines(path, indent + "    ")


def _config_note(config: PipelineConfig) -> str:
    """The config, with where each part was defined, for build errors."""
    src = config.src
    where = f"  (defined at {src.defined_at})" if src.defined_at else ""
    lines = ["PipelineConfig:"]
    if isinstance(src, MergeConfig):
        lines.append(f" - Source: Merge {src.name!r}{where}")
        for c in src.pipeline_configs:
            lines.append(_indent(_config_note(c), "     "))
    else:
        lines.append(f" - Source: {src!r}{where}")
    lines.append(" - Pipes:")
    lines.extend(_stage_lines(config.pipes, "   "))
    lines.append(f" - Sink: {config.sink!r}")
    return "\n".join(lines)


class _HookedAggregator(Aggregator):
    def __init__(self, agg, hooks):
        self._accumulate = hooked_map(agg.accumulate, hooks)
        self._agg = agg

    def accumulate(self, item):
        return self._accumulate(item)

    def flush(self):
        return self._agg.flush()


def build_pipeline(
    config: PipelineConfig,
    /,
    *,
    num_threads: int,
    max_failures: int | Fraction = -1,
    report_stats_interval: float = -1,
    queue_class=None,
    task_hook_factory=None,
    stage_id: int = 0,
    background_tasks=None,
    use_thread_output_queue: bool = False,
    stats_callback=None,
    name: str | None = None,
    failure_log_burst: int = 5,
    failure_log_interval: float = 10.0,
    trace_every: int = 0,
    trace_capacity: int = 65536,
    autotune: bool | Autotune | None = None,
) -> Pipeline:
    """Builds a :class:`Pipeline` (not started) from ``config``.

    Args:
        num_threads: threads of the worker pool that runs every op (sync
            Python ops hold the GIL only during their call; native ops never).
        max_failures: the budget for stages without their own: an int count
            of failed calls tolerated (-1: unlimited, 0: none) or a Fraction
            rate in (0, 1] checked after 100 calls. Counted over all such
            stages together, as in SPDL.
        report_stats_interval: seconds between statistics reports to
            ``stats_callback`` and the ``feedline.pipeline`` logger (at
            INFO), and the interval of the default hooks; <= 0: only the
            final one. A ``TaskStatsHook`` from ``task_hook_factory``
            reports at its own ``interval`` instead.
        task_hook_factory: ``f(StageInfo) -> list[TaskHook]`` per stage.
        stage_id: the id of the first stage in StageInfo.
        stats_callback: called with a :class:`PipelineStats` snapshot at every
            report and once at the end (e.g. a :class:`JsonLinesWriter`).
        name: the pipeline's name in stats and logs; default ``pipeline<id>``.
        failure_log_burst, failure_log_interval: each stage logs its first
            ``failure_log_burst`` failed calls in full, then at most one
            summary line per ``failure_log_interval`` seconds.
        trace_every, trace_capacity: record one call in every
            ``trace_every`` of each stage (0: off) for
            :meth:`Pipeline.write_trace`, keeping the latest
            ``trace_capacity``.
        autotune: ``True`` or an :class:`Autotune` lets the pipeline move
            its stages' concurrency and its active threads toward the
            highest output rate within a CPU budget while it runs (off by
            default; the settings given are where it starts).
        queue_class: a :class:`StatsQueue` subclass (or a function making
            one), made per native queue as ``queue_class(info, buffer_size=n)``
            and fed that queue's counters at its ``interval`` and at the end
            (the default from ``config.set_default_queue_class()`` gets
            ``interval=report_stats_interval``). The queues are native:
            other classes are ignored with a warning.
        use_thread_output_queue: accepted for SPDL compatibility; the
            native sink is already thread-based.
        background_tasks: factories of :class:`BackgroundTask` run beside the
            pipeline (after those of
            ``config.set_default_background_tasks()``): started with it,
            cancelled at its end; their errors are logged, never raised.

    Without ``task_hook_factory``, each stage gets the hook of
    :func:`feedline.pipeline.config.set_default_hook_class`: with the default
    (:class:`TaskStatsHook`) the engine's own statistics serve, and no hook
    object is made; another class is made per stage as
    ``cls(info, interval=report_stats_interval)``; ``None``: no hooks. The
    callback of ``config.set_default_build_callback()`` is called with
    ``config`` first (its errors are logged, never raised).

    Errors in the description raise here, with a note naming the config and
    the file and line where each stage was defined.
    """
    if not isinstance(config, PipelineConfig):
        raise TypeError(f"build_pipeline takes a PipelineConfig, got {type(config).__name__}")
    if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
        raise ValueError(f"num_threads must be an int >= 1, got {num_threads!r}")
    _check_max_failures(max_failures, "build")
    for what, value, low in (("trace_every", trace_every, 0), ("trace_capacity", trace_capacity, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{what} must be an int >= {low}, got {value!r}")
    autotune_args = _autotune.native_args(autotune)
    profile_inputs = _profile.diagnostic_mode()
    if profile_inputs is not None:
        return _profile._ProfilePipeline(config, profile_inputs)  # type: ignore[return-value]
    callback = _config.get_default_build_callback()
    if callback is not None:
        try:
            callback(config)
        except Exception:
            _LG.exception("the default build callback failed")
    queue_factory = _queue_factory(queue_class, report_stats_interval)
    tasks = [*(_config.get_default_background_tasks() or ()), *(background_tasks or ())]
    del use_thread_output_queue  # the native sink is already thread-based
    if task_hook_factory is None:
        task_hook_factory = _default_hook_factory(report_stats_interval)

    with _pipeline_ids_lock:
        pipeline_id = next(_pipeline_ids)
    name = name or f"pipeline{pipeline_id}"
    builder = _Builder(pipeline_id, stage_id, task_hook_factory, name)
    builder.region_kwargs = {"max_failures": max_failures, "report_stats_interval": report_stats_interval}
    resume = None
    built = config
    if isinstance(config.src, SourceConfig) and config.src.resumable:
        built, resume = _resume.prepare(config)
    else:
        resume = _resume.merge_resume(config)
    try:
        spec = builder.spec(built, with_sink=True)
    except Exception as e:
        _add_note(e, _config_note(config))
        raise
    sink_size = built.sink.buffer_size if built.sink is not None else 1
    queues = builder.stats_queues(queue_factory, sink_size) if queue_factory is not None else []
    if not all(isinstance(q, StatsQueue) for _, q in queues):
        _ignore_queue_class(queue_class or _config.get_default_queue_class(), stacklevel=3)
        queues = []
    background = _background.BackgroundTasks(tasks, builder.loop_thread)
    hooks = [*builder.stage_hooks, *(q for _, q in queues)]
    stage_hooks = StageHooks([*hooks, background] if background else hooks)
    # The engine snapshots as often as the most frequent reporter needs: the
    # logger and stats_callback (report_stats_interval) or a hook's own
    # interval; the dispatcher gives each its own schedule.
    period = snapshot_period(
        float(report_stats_interval),
        [hook_interval(h) for hs in builder.stats_hooks for h in hs] + [hook_interval(q) for _, q in queues],
    )
    dispatcher = StatsDispatcher(
        infos=builder.infos,
        hooks=builder.stats_hooks,
        user_callback=stats_callback,
        interval=report_stats_interval,
        on_end=stage_hooks.exit,
        region_hook_factory=builder.region_stats_hooks,
        period=period,
        queues=queues,
    )
    try:
        native = spec.build(
            num_threads=num_threads,
            max_failures=_budget(max_failures),
            report_interval=float(period),
            stats_callback=dispatcher,
            failure_log_burst=failure_log_burst,
            failure_log_interval=float(failure_log_interval),
            name=name,
            trace_every=trace_every,
            trace_capacity=trace_capacity,
            autotune=autotune_args,
        )
    except Exception as e:
        _add_note(e, _config_note(config))
        raise
    for pool in builder.region_pools:
        pool.attach(native)
    return Pipeline(
        native,
        description=repr(config),
        # Background tasks run on the loop too: the pipeline must close it.
        loop_thread=builder.loop_thread if builder.needs_loop or background else None,
        stage_hooks=stage_hooks,
        infos=builder.infos,
        locations=builder.locations,
        resume=resume,
    )
