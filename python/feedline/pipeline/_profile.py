"""profile_pipeline(): each stage run alone at several thread counts.

SPDL's profiling tool, with its names and behaviour: the source's first
``num_inputs`` items are fetched once, then every stage of the config runs
in a pipeline of its own (those items in, a sink of 2 out) at pool sizes
32, 16, 8, 4 and 1 (aggregate and disaggregate at 1 only), with the stage's
concurrency at 32, so that only the threads vary. Each setting's QPS
(outputs per second) and the sink queue's occupancy tell how far the stage
scales: a stage whose QPS stops rising with threads is bound by something
other than threads (the GIL, a lock, the disk). The outputs of each stage's
last run feed the next stage. A merge's input pipelines are profiled one
after the other and their outputs merged (concatenated, then shuffled).

Beyond SPDL, each setting also records the engine's verdict on that run
(``_ProfileStats.bottleneck``: ``gil`` when the stage's Python calls queue
for the GIL).

The diagnostic mode (``FEEDLINE_PIPELINE_DIAGNOSTIC_MODE``, or SPDL's
``SPDL_PIPELINE_DIAGNOSTIC_MODE``, set to a true value) makes
``build_pipeline`` return a pipeline whose first read profiles the config
with ``*_DIAGNOSTIC_MODE_NUM_ITEMS`` inputs (default 1000) and exits the
program (``SystemExit(0)``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import random
import threading
import time
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from . import config as _config
from .defs import (
    AggregateConfig,
    DisaggregateConfig,
    MergeConfig,
    PipeConfig,
    PipelineConfig,
    SinkConfig,
    SourceConfig,
)

__all__ = ["ProfileHook", "ProfileResult", "profile_pipeline"]

_LG = logging.getLogger("feedline.pipeline")

_THREADS = (32, 16, 8, 4, 1)


@dataclasses.dataclass(frozen=True)
class _ProfileStats:
    """One setting of one stage."""

    concurrency: int  # threads of the pool
    qps: float  # outputs per second
    occupancy_rate: float  # mean fill of the sink queue, in [0, 1]
    bottleneck: str = ""  # the engine's verdict on the run (kind: stage)


@dataclasses.dataclass(frozen=True)
class ProfileResult:
    """The settings of one stage, in the order they ran."""

    name: str
    stats: Sequence[_ProfileStats]


class ProfileHook(ABC):
    """Wraps the profiling runs, e.g. to start a profiler around each."""

    @abstractmethod
    def stage_profile_hook(self, stage: Any, concurrency: int) -> contextlib.AbstractContextManager:
        """A context manager around the run of ``stage`` at ``concurrency``
        threads."""

    @abstractmethod
    def pipeline_profile_hook(self) -> contextlib.AbstractContextManager:
        """A context manager around the whole profiling."""


class _NoHook(ProfileHook):
    def stage_profile_hook(self, stage, concurrency):
        return contextlib.nullcontext()

    def pipeline_profile_hook(self):
        return contextlib.nullcontext()


def _local_rank_zero() -> bool:
    try:
        return int(os.environ.get("LOCAL_RANK", "0")) == 0
    except ValueError:
        return True


def _run(config: PipelineConfig, num_threads: int, limit: int | None = None) -> tuple[list, float, Any]:
    """Builds and drains ``config``; returns (outputs, seconds, stats)."""
    from ._build import build_pipeline

    pipeline = build_pipeline(config, num_threads=num_threads)
    outputs: list = []
    t0 = time.perf_counter()
    with pipeline.auto_stop():
        for item in pipeline:
            outputs.append(item)
            if limit is not None and len(outputs) >= limit:
                break
    elapsed = time.perf_counter() - t0
    return outputs, elapsed, pipeline.stats()


def _fetch(src: SourceConfig, num_inputs: int) -> list:
    outputs, _, _ = _run(PipelineConfig(src=src, pipes=(), sink=SinkConfig(1)), 1, limit=num_inputs)
    return outputs


def _alone(stage: Any) -> Any:
    """The stage as profiled: a pipe at concurrency 32, on the pool."""
    if isinstance(stage, PipeConfig):
        return dataclasses.replace(stage, concurrency=max(_THREADS), executor=None)
    return stage


def _profile_stages(
    config: PipelineConfig, num_inputs: int, callback: Callable | None, hook: ProfileHook, results: list
) -> list:
    """Profiles the stages of ``config``; returns the last stage's outputs."""
    if isinstance(config.src, MergeConfig):
        merged: list = []
        for sub in config.src.pipeline_configs:
            merged += _profile_stages(sub, num_inputs, callback, hook, results)
        random.Random(0).shuffle(merged)
        inputs = merged
    else:
        inputs = _fetch(config.src, num_inputs)
    if not inputs:
        raise RuntimeError(f"profile_pipeline: the source gave no items: {config.src!r}")
    for stage in config.pipes:
        if not isinstance(stage, (PipeConfig, AggregateConfig, DisaggregateConfig)):
            warnings.warn(f"profile_pipeline: {type(stage).__name__} stages are not profiled: {stage!r}", stacklevel=4)
            continue
        settings = (1,) if isinstance(stage, (AggregateConfig, DisaggregateConfig)) else _THREADS
        name = getattr(stage, "name", repr(stage))
        _LG.info("Profiling Stage: %s", name)
        stats = []
        outputs: list = []
        for threads in settings:
            single = PipelineConfig(src=SourceConfig(list(inputs)), pipes=(_alone(stage),), sink=SinkConfig(2))
            with hook.stage_profile_hook(stage, threads):
                outputs, elapsed, run_stats = _run(single, threads)
            qps = len(outputs) / elapsed if elapsed > 0 else 0.0
            occupancy = run_stats.stages[-1].input_queue.occupancy
            verdict = run_stats.bottleneck()
            stats.append(_ProfileStats(threads, qps, occupancy, f"{verdict.kind}: {verdict.stage_name}"))
            _LG.info(" - Concurrency: %d", threads)
            _LG.info(" - QPS: %.2f", qps)
            _LG.info(" - Occupancy Rate: %.2f", occupancy)
        result = ProfileResult(name, stats)
        results.append(result)
        if callback is not None:
            callback(result)
        inputs = outputs
    return inputs


def profile_pipeline(
    cfg: PipelineConfig,
    num_inputs: int = 1000,
    *,
    callback: Callable[[ProfileResult], None] | None = None,
    hook: ProfileHook | None = None,
) -> Sequence[ProfileResult]:
    """Runs each stage of ``cfg`` alone at 32, 16, 8, 4 and 1 threads on the
    source's first ``num_inputs`` items and returns one
    :class:`ProfileResult` per stage (QPS and sink occupancy per setting).

    Only on local rank 0 (``LOCAL_RANK`` unset or 0); elsewhere returns
    ``[]`` at once. ``callback`` is called with each stage's result as it
    is ready, ``hook`` wraps the runs (default: the one of
    :func:`feedline.pipeline.config.set_default_profile_hook`). Path
    variants and placement regions are skipped with a warning.

    Raises:
        RuntimeError: the source gave no items.
    """
    if not isinstance(cfg, PipelineConfig):
        raise TypeError(f"profile_pipeline takes a PipelineConfig, got {type(cfg).__name__}")
    if isinstance(num_inputs, bool) or not isinstance(num_inputs, int) or num_inputs < 1:
        raise ValueError(f"num_inputs must be an int >= 1, got {num_inputs!r}")
    if not _local_rank_zero():
        return []
    hook = hook if hook is not None else _config.get_default_profile_hook() or _NoHook()
    callback = callback if callback is not None else _config.get_default_profile_callback()
    results: list[ProfileResult] = []
    outer = getattr(_profiling, "active", False)
    _profiling.active = True  # the pipelines built here run for real
    try:
        with hook.pipeline_profile_hook():
            _profile_stages(cfg, num_inputs, callback, hook, results)
    finally:
        _profiling.active = outer
    return results


_profiling = threading.local()  # set while this thread runs profile_pipeline


def diagnostic_mode() -> int | None:
    """The number of inputs to profile with when the diagnostic mode is on
    (and this thread is not profiling already), else None."""
    if getattr(_profiling, "active", False):
        return None
    if not _config.is_diagnostic_mode_enabled():
        return None
    return _config.diagnostic_mode_num_sources()


class _ProfilePipeline:
    """What ``build_pipeline`` returns in diagnostic mode: starting and
    stopping do nothing; the first read profiles the config and exits."""

    def __init__(self, config: PipelineConfig, num_inputs: int):
        self._config = config
        self._num_inputs = num_inputs

    def start(self, *args: Any, **kwargs: Any) -> None:
        pass

    def stop(self, *args: Any, **kwargs: Any) -> bool:
        return True

    @contextlib.contextmanager
    def auto_stop(self, *args: Any, **kwargs: Any) -> Iterator[_ProfilePipeline]:
        yield self

    def _profile_and_exit(self):
        _LG.info("Diagnostic mode: profiling the pipeline with %d inputs, then exiting.", self._num_inputs)
        profile_pipeline(self._config, self._num_inputs)
        raise SystemExit(0)

    def get_item(self, *args: Any, **kwargs: Any) -> Any:
        self._profile_and_exit()

    def get_iterator(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        self._profile_and_exit()
        yield  # a generator, as Pipeline.get_iterator()

    def __iter__(self) -> Iterator[Any]:
        return self.get_iterator()
