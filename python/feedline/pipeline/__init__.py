"""Data-loading pipelines on feedline's native engine.

The API of ``spdl.pipeline``, so that migrating is an import change: build a
pipeline with :class:`PipelineBuilder` (or :func:`build_pipeline` and the
config classes of :mod:`feedline.pipeline.defs`) and iterate it. Every stage
runs in the C++ engine; Python ops hold the GIL only during their call, and
native ops (:class:`NativeOp`, e.g. from ``feedline.io.ops``) never take it.

:func:`defs.PathVariants` routes items down alternative paths,
``defs.Merge(..., op=...)`` takes a custom merge op (see :func:`is_eof`), and
:mod:`feedline.pipeline.config` holds the process-wide defaults.

Statistics are always on: :meth:`Pipeline.stats` returns a snapshot at any
time, ``report_stats_interval`` reports them periodically to
:class:`TaskStatsHook` callbacks and the ``feedline.pipeline`` logger, and
:class:`JsonLinesWriter` exports them. See docs/python.md for what differs
from SPDL and why.
"""

from .._errors import PipelineFailure
from .._feedline_ext import (
    AutotuneDecision,
    AutotuneStats,
    Bottleneck,
    LatencyHistogram,
    NativeOp,
    NativeSource,
    PipelineStats,
    QueueStats,
    RegionStats,
    StageStats,
)
from . import config, defs
from ._arena import SharedMemoryRingBuffer, SharedMemorySegmentPool
from ._autotune import Autotune
from ._background import BackgroundTask, BackgroundTaskFactory
from ._build import build_pipeline
from ._builder import PipelineBuilder
from ._hooks import (
    JsonLinesWriter,
    QueuePerfStats,
    StageInfo,
    TaskHook,
    TaskPerfStats,
    TaskStatsHook,
)
from ._merge import is_eof, is_epoch_end
from ._monitor import ProcessGroupResourceUsage, ProcessGroupStatsMonitor
from ._pipeline import Pipeline
from ._profile import ProfileHook, ProfileResult, profile_pipeline
from ._prometheus import PrometheusExporter
from ._queues import AsyncQueue, StatsQueue, create_task
from ._sqlite import SQLiteStatsWriter
from ._subprocess import iterate_in_subprocess, run_pipeline_in_subprocess

__all__ = [
    "AsyncQueue",
    "Autotune",
    "AutotuneDecision",
    "AutotuneStats",
    "BackgroundTask",
    "BackgroundTaskFactory",
    "Bottleneck",
    "JsonLinesWriter",
    "LatencyHistogram",
    "NativeOp",
    "NativeSource",
    "Pipeline",
    "PipelineBuilder",
    "ProcessGroupResourceUsage",
    "ProcessGroupStatsMonitor",
    "PipelineFailure",
    "PipelineStats",
    "ProfileHook",
    "PrometheusExporter",
    "ProfileResult",
    "QueuePerfStats",
    "QueueStats",
    "RegionStats",
    "SQLiteStatsWriter",
    "SharedMemoryRingBuffer",
    "SharedMemorySegmentPool",
    "StageInfo",
    "StageStats",
    "StatsQueue",
    "TaskHook",
    "TaskPerfStats",
    "TaskStatsHook",
    "build_pipeline",
    "cache_iterator",
    "config",
    "create_task",
    "defs",
    "is_eof",
    "is_epoch_end",
    "iterate_in_subprocess",
    "profile_pipeline",
    "run_pipeline_in_subprocess",
]


def __getattr__(name: str):
    # SPDL's spdl.pipeline.cache_iterator; it lives in feedline.dataloader,
    # which imports this package, so it is looked up on first use.
    if name == "cache_iterator":
        from ..dataloader._cache import cache_iterator

        return cache_iterator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


for _cls in (Bottleneck, LatencyHistogram, NativeOp, NativeSource, PipelineStats, QueueStats, RegionStats, StageStats):
    _cls.__module__ = __name__
del _cls
