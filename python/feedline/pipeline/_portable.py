"""The stages' executors of a config that run_pipeline_in_subprocess()
sends to its worker process.

A ``concurrent.futures.ThreadPoolExecutor`` or ``ProcessPoolExecutor`` does
not pickle (it holds locks, threads and queues), and one copied by
``fork`` is broken in the child (its threads or its pool's management
thread are not there). Each such executor (of exactly those types; other
executors travel as they are) is replaced by an :class:`ExecutorProxy`,
which pickles as the executor's class and settings and builds a fresh
executor of its own in the worker on its first ``submit``. One executor
shared by several stages becomes one proxy, so the stages share one pool
in the worker too.

A process pool's workers are the worker's children: each exits when the
worker dies (SIGKILL included), as the regions' and iterate_in_subprocess's
workers do, so no process outlives a crash. A pool without an
``mp_context`` starts its processes with ``forkserver``, not ``fork``:
the worker runs the pipeline's threads when the pool starts.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import inspect
import multiprocessing
import sys
import threading
from typing import Any

from .defs import (
    MergeConfig,
    PipeConfig,
    PipelineConfig,
    PlacementConfig,
    ProcessPoolExecutorConfig,
    _map_stages,
)


class _WatchThen:
    """A process pool worker's initializer: exit with the process that
    started the pool, then run the user's initializer."""

    def __init__(self, initializer, initargs):
        self.initializer = initializer
        self.initargs = tuple(initargs)

    def __call__(self) -> None:
        from ._subprocess import _watch_parent

        _watch_parent()
        if self.initializer is not None:
            self.initializer(*self.initargs)


class ExecutorProxy(concurrent.futures.Executor):
    """An executor that pickles as its class and settings and builds the
    real one on its first ``submit`` (in the process it reached)."""

    def __init__(self, cls: type, kwargs: dict):
        self._cls = cls
        self._kwargs = kwargs
        self._executor: concurrent.futures.Executor | None = None
        self._lock = threading.Lock()
        self._shutdown = False

    def __getstate__(self):
        return {"cls": self._cls, "kwargs": self._kwargs, "shutdown": self._shutdown}

    def __setstate__(self, state) -> None:
        self.__init__(state["cls"], state["kwargs"])  # type: ignore[misc]
        self._shutdown = state["shutdown"]

    def __repr__(self) -> str:
        return f"ExecutorProxy({self._cls.__name__}, max_workers={self._kwargs.get('max_workers')})"

    def _build(self) -> concurrent.futures.Executor:
        kwargs = dict(self._kwargs)
        if self._cls is concurrent.futures.ProcessPoolExecutor:
            kwargs["mp_context"] = multiprocessing.get_context(kwargs["mp_context"])
            kwargs["initializer"] = _WatchThen(kwargs["initializer"], kwargs["initargs"])
            kwargs["initargs"] = ()
        return self._cls(**kwargs)

    def submit(self, fn, /, *args, **kwargs):
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new futures after shutdown")
            if self._executor is None:
                self._executor = self._build()
            executor = self._executor
        return executor.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shutdown = True
            executor = self._executor
        if executor is not None:
            executor.shutdown(wait=wait, cancel_futures=cancel_futures)


def _initializer_of(executor, where: str) -> tuple[Any, tuple]:
    """The ``initializer`` and ``initargs`` an executor was made with.
    Python 3.14's ThreadPoolExecutor keeps them only in the closure of its
    worker-context factory."""
    if hasattr(executor, "_initializer"):
        return executor._initializer, tuple(executor._initargs)
    factory = getattr(executor, "_create_worker_context", None)
    names = inspect.getclosurevars(factory).nonlocals if callable(factory) else {}
    if "initializer" not in names:
        raise ValueError(
            f"{where}: cannot read the initializer of its {type(executor).__name__} on Python "
            f"{sys.version.split()[0]}, so run_pipeline_in_subprocess cannot rebuild it in the worker"
        )
    return names["initializer"], tuple(names.get("initargs", ()))


def _settings(executor, where: str) -> tuple[type, dict] | None:
    """The class and settings of an executor to rebuild in the worker; None
    for executors that travel as they are."""
    cls = type(executor)
    if cls is concurrent.futures.ThreadPoolExecutor:
        used = executor._threads or executor._shutdown
    elif cls is concurrent.futures.ProcessPoolExecutor:
        used = executor._processes or executor._shutdown_thread
    else:
        return None
    if used:
        raise ValueError(
            f"{where}: its {cls.__name__} has already run work or been shut down; "
            "run_pipeline_in_subprocess needs a fresh one (it builds a new pool in the worker)"
        )
    initializer, initargs = _initializer_of(executor, where)
    if cls is concurrent.futures.ThreadPoolExecutor:
        return cls, {
            "max_workers": executor._max_workers,
            "thread_name_prefix": executor._thread_name_prefix,
            "initializer": initializer,
            "initargs": initargs,
        }
    # A pool made without mp_context holds the default context, the same
    # object as an explicit multiprocessing.get_context(): both start with
    # forkserver in the worker.
    ctx = executor._mp_context
    method = ctx.get_start_method() if ctx is not None and ctx is not multiprocessing.get_context() else None
    kwargs: dict[str, Any] = {
        "max_workers": executor._max_workers,
        "mp_context": method or "forkserver",
        "initializer": initializer,
        "initargs": initargs,
    }
    per_child = getattr(executor, "_max_tasks_per_child", None)
    if per_child is not None:
        kwargs["max_tasks_per_child"] = per_child
    return cls, kwargs


class _Rewriter:
    def __init__(self):
        # id(executor) -> proxy; the config being rewritten holds the
        # executors, so their ids stay unique while it runs.
        self.proxies: dict[int, ExecutorProxy] = {}
        self.needs_children: list[str] = []  # what starts processes in the worker

    def executor(self, executor, where: str):
        proxy = self.proxies.get(id(executor))
        if proxy is not None:
            return proxy
        settings = _settings(executor, where)
        if settings is None:
            return executor
        proxy = ExecutorProxy(*settings)
        self.proxies[id(executor)] = proxy
        if settings[0] is concurrent.futures.ProcessPoolExecutor:
            self.needs_children.append(f"{where} (ProcessPoolExecutor)")
        return proxy

    def stage(self, s):
        if isinstance(s, PipeConfig) and s.executor is not None:
            return dataclasses.replace(s, executor=self.executor(s.executor, f"stage {s.name!r}"))
        if isinstance(s, PlacementConfig) and isinstance(s.target, ProcessPoolExecutorConfig):
            self.needs_children.append(f"the region to({s.target!r})")
        return s

    def config(self, config: PipelineConfig) -> PipelineConfig:
        src = config.src
        if isinstance(src, MergeConfig):
            src = dataclasses.replace(src, pipeline_configs=[self.config(c) for c in src.pipeline_configs])
        return dataclasses.replace(config, src=src, pipes=_map_stages(config.pipes, self.stage))


def portable(config: PipelineConfig, daemon: bool) -> PipelineConfig:
    """``config`` with its thread and process pools replaced by proxies (see
    the module docstring); ValueError when a daemon worker would have to
    start processes (a pool's or a region's), which multiprocessing forbids."""
    rewriter = _Rewriter()
    out = rewriter.config(config)
    if daemon and rewriter.needs_children:
        raise ValueError(
            "run_pipeline_in_subprocess(daemon=True): a daemon process cannot start processes, and "
            f"{', '.join(rewriter.needs_children)} would start them in the worker; pass daemon=False (the "
            "default: the worker's processes exit with it all the same)"
        )
    return out
