"""Building blocks of a pipeline description, as plain config objects.

The same classes and helpers as ``spdl.pipeline.defs``: a
:class:`PipelineConfig` is a source (:class:`SourceConfig` or a
:class:`MergeConfig` of other pipelines), a list of processing stages
(:func:`Pipe`, :func:`Aggregate`, :func:`Disaggregate`,
:func:`PathVariants`) and a :class:`SinkConfig`. Every config class can be
subscripted (``PipelineConfig[int]``) for annotations, as in SPDL. :func:`feedline.pipeline.build_pipeline` turns one into a
running :class:`~feedline.pipeline.Pipeline`; ``PipelineBuilder`` produces the
same objects.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from abc import ABC, abstractmethod
from collections.abc import AsyncIterable, Callable, Iterable, Sequence
from fractions import Fraction
from typing import Any

from .._feedline_ext import NativeOp, NativeSource
from ._common import Subscriptable, caller_location, locate, locate_source_object

__all__ = [
    "Aggregate",
    "AggregateConfig",
    "Aggregator",
    "Collate",
    "Disaggregate",
    "DisaggregateConfig",
    "ExecutorConfig",
    "InterpreterPoolExecutorConfig",
    "MAIN_PROCESS",
    "Merge",
    "MergeConfig",
    "PathVariants",
    "PathVariantsConfig",
    "Pipe",
    "PipeConfig",
    "PipelineConfig",
    "PlacementConfig",
    "ProcessPoolExecutorConfig",
    "SinkConfig",
    "SourceConfig",
]


def _locate(obj) -> str:
    """``module.name at file:line`` of an op (see _common.locate)."""
    return locate(obj)


def _source_repr(src) -> str:
    if isinstance(src, NativeSource):
        return repr(src)
    return locate_source_object(src)


def _defined_at() -> Any:
    """A dataclass field holding where the config was made (``file:line``
    of the user's call); shown in build errors, not compared."""
    return dataclasses.field(default=None, compare=False, repr=False, kw_only=True)


@dataclasses.dataclass(frozen=True)
class SourceConfig(Subscriptable):
    """The source of a pipeline: an iterable, an async iterable or a
    :class:`~feedline.pipeline.NativeSource`.

    With ``continuous=True`` the source is iterated again and again; each pass
    is one epoch, and each ``for x in pipeline`` reads one epoch.

    With ``resumable=True`` (feedline's addition) the pipeline built from it
    has ``state_dict()``/``load_state_dict()``; the source must have both
    (the samplers and sources of :mod:`feedline.source`).
    """

    source: Iterable | AsyncIterable | NativeSource
    continuous: bool = False
    defined_at: str | None = _defined_at()
    resumable: bool = dataclasses.field(default=False, kw_only=True)

    def __post_init__(self):
        if self.defined_at is None:
            object.__setattr__(self, "defined_at", caller_location(skip=2))
        s = self.source
        if not (isinstance(s, NativeSource) or hasattr(s, "__iter__") or hasattr(s, "__aiter__")):
            raise ValueError(
                f"Source must be an iterable, an async iterable or a NativeSource; got {type(s).__name__}."
            )
        if self.resumable and not (
            hasattr(s, "__iter__")
            and callable(getattr(s, "state_dict", None))
            and callable(getattr(s, "load_state_dict", None))
        ):
            raise TypeError(
                f"a resumable source must be an iterable with state_dict() and load_state_dict(); "
                f"{type(s).__name__} is not"
            )

    def __repr__(self):
        cont = ", continuous=True" if self.continuous else ""
        if self.resumable:
            cont += ", resumable=True"
        return f"SourceConfig(source={_source_repr(self.source)}{cont})"


_ORDERS = ("completion", "input")


def _check_max_failures(max_failures, where: str):
    if max_failures is None:
        return
    if isinstance(max_failures, bool) or not isinstance(max_failures, (int, Fraction)):
        raise TypeError(f"{where}: max_failures must be an int or a Fraction, got {type(max_failures).__name__}")
    if isinstance(max_failures, Fraction) and not (0 < max_failures <= 1):
        raise ValueError(f"{where}: a Fraction max_failures must be in (0, 1], got {max_failures}")
    if isinstance(max_failures, int) and max_failures < -1:
        raise ValueError(f"{where}: max_failures must be -1 (unlimited) or >= 0, got {max_failures}")


@dataclasses.dataclass(frozen=True)
class PipeConfig(Subscriptable):
    """One processing stage: ``op`` applied to every item. Made by :func:`Pipe`."""

    name: str
    op: Callable | NativeOp
    concurrency: int = 1
    executor: Any = None
    output_order: str = "completion"
    max_failures: int | Fraction | None = None
    defined_at: str | None = _defined_at()

    def __repr__(self):
        op = repr(self.op) if isinstance(self.op, NativeOp) else _locate(self.op)
        return f"{self.name}(concurrency={self.concurrency}, output_order={self.output_order!r}, op={op})"


def _op_name(op) -> str:
    if isinstance(op, NativeOp):
        return op.name
    target = op
    while isinstance(target, functools.partial):
        target = target.func
    name = getattr(target, "__name__", None)
    return name if name else type(target).__name__


def Pipe(  # noqa: N802 (SPDL's name)
    op,
    /,
    *,
    concurrency: int = 1,
    executor=None,
    name: str | None = None,
    output_order: str = "completion",
    max_failures: int | Fraction | None = None,
) -> PipeConfig:
    """A stage that applies ``op`` to every item.

    ``op`` is a function or callable (run on the worker pool; the GIL is held
    only during the call), an ``async def`` function (run on the pipeline's
    event loop), a generator or async generator function (0..n outputs per
    item), a :class:`~feedline.pipeline.NativeOp` (runs without the GIL), or an
    object with ``__getitem__`` (a list or dict: its lookup is the op). A
    result of ``None`` drops the item.

    Args:
        concurrency: calls in flight at once (>= 1).
        executor: run a sync op on this ``concurrent.futures.Executor`` instead
            of the worker pool (not for async ops).
        name: the stage's name in stats and errors; default: the op's name.
        output_order: ``"completion"`` (as calls finish) or ``"input"``.
        max_failures: this stage's own failure budget: an int count (-1:
            unlimited) or a Fraction rate in (0, 1]. Default: the pipeline's.
    """
    if not isinstance(op, NativeOp) and hasattr(op, "__getitem__") and not isinstance(op, type):
        op = op.__getitem__
    if not (isinstance(op, NativeOp) or callable(op)):
        raise TypeError(f"op must be callable or a NativeOp, got {type(op).__name__}")
    if output_order not in _ORDERS:
        raise ValueError(f'output_order must be "completion" or "input", got {output_order!r}')
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be an int >= 1, got {concurrency!r}")
    is_async = _is_async(op)
    if executor is not None and (is_async or isinstance(op, NativeOp)):
        raise ValueError("`executor` cannot be specified when op is async or native.")
    if output_order == "input" and _is_generator(op):
        raise ValueError('output_order="input" is not supported for generator ops.')
    _check_max_failures(max_failures, "Pipe")
    return PipeConfig(
        name=name or _op_name(op),
        op=op,
        concurrency=concurrency,
        executor=executor,
        output_order=output_order,
        max_failures=max_failures,
        defined_at=caller_location(),
    )


def _call_target(op):
    target = op
    while isinstance(target, functools.partial):
        target = target.func
    if not (inspect.isfunction(target) or inspect.ismethod(target)) and callable(target):
        call = getattr(type(target), "__call__", None)  # noqa: B004 (the method, not a callable check)
        if call is not None:
            return call
    return target


def _is_async(op) -> bool:
    if isinstance(op, NativeOp):
        return False
    t = _call_target(op)
    return inspect.iscoroutinefunction(t) or inspect.isasyncgenfunction(t)


def _is_generator(op) -> bool:
    if isinstance(op, NativeOp):
        return op.kind == "generator"
    t = _call_target(op)
    return inspect.isgeneratorfunction(t) or inspect.isasyncgenfunction(t)


class Aggregator(Subscriptable, ABC):
    """Custom batching: :meth:`accumulate` takes one item and returns a batch
    when one is ready (``None`` to keep buffering); :meth:`flush` returns what
    is left at an epoch end or at the end of the stream."""

    @abstractmethod
    def accumulate(self, item) -> Any | None: ...

    @abstractmethod
    def flush(self) -> Any | None: ...


class Collate(Aggregator):
    """Batches ``n`` items into a list (the native aggregate does the same
    without Python; this class exists for code that composes aggregators)."""

    def __init__(self, n: int):
        if n < 1:
            raise ValueError(f"the batch size must be >= 1, got {n}")
        self.n = n
        self._buf: list = []

    def accumulate(self, item):
        self._buf.append(item)
        if len(self._buf) >= self.n:
            out, self._buf = self._buf, []
            return out
        return None

    def flush(self):
        out, self._buf = self._buf, []
        return out or None

    def __repr__(self):
        return f"collate({self.n})"


@dataclasses.dataclass(frozen=True)
class AggregateConfig(Subscriptable):
    """Batches items. Made by :func:`Aggregate`."""

    name: str
    op: int | Aggregator
    drop_last: bool = False
    defined_at: str | None = _defined_at()

    def __repr__(self):
        return self.name


def Aggregate(input: int | Aggregator, /, *, drop_last: bool = False) -> AggregateConfig:  # noqa: N802,A002
    """A stage that batches items: ``n`` items into a list (natively, without
    the GIL), or with a custom :class:`Aggregator`. Partial batches are emitted
    at epoch ends and at the end unless ``drop_last``."""
    if isinstance(input, bool) or not isinstance(input, (int, Aggregator)):
        raise TypeError(f"Aggregate takes an int or an Aggregator, got {type(input).__name__}")
    if isinstance(input, int) and input < 1:
        raise ValueError(f"the batch size must be >= 1, got {input}")
    desc = str(input) if isinstance(input, int) else repr(input)
    name = f"aggregate({desc}, drop_last=True)" if drop_last else f"aggregate({desc})"
    return AggregateConfig(name=name, op=input, drop_last=drop_last, defined_at=caller_location())


@dataclasses.dataclass(frozen=True)
class DisaggregateConfig(Subscriptable):
    """Splits each batch into its items. Made by :func:`Disaggregate`."""

    name: str = "disaggregate"
    defined_at: str | None = _defined_at()

    def __repr__(self):
        return self.name


def Disaggregate() -> DisaggregateConfig:  # noqa: N802
    """A stage that splits each batch (a list or other iterable) into items."""
    return DisaggregateConfig(defined_at=caller_location())


@dataclasses.dataclass(frozen=True)
class SinkConfig(Subscriptable):
    """The output buffer the consumer reads from (``buffer_size`` >= 1 items)."""

    buffer_size: int

    def __post_init__(self):
        if isinstance(self.buffer_size, bool) or not isinstance(self.buffer_size, int) or self.buffer_size < 1:
            raise ValueError(f"buffer_size must be an int >= 1, got {self.buffer_size!r}")


@dataclasses.dataclass(frozen=True)
class MergeConfig(Subscriptable):
    """Several pipelines (without sinks) merged into one stream. Made by
    :func:`Merge`.

    ``name`` names the merge stage in reprs, statistics and errors. ``op`` is
    an optional custom merge: ``async op(info, input_queues, output_queue)``.
    """

    pipeline_configs: Sequence[PipelineConfig]
    op: Callable | None = None
    name: str = "merge"
    defined_at: str | None = _defined_at()

    def __post_init__(self):
        if self.defined_at is None:
            object.__setattr__(self, "defined_at", caller_location(skip=2))
        if not self.pipeline_configs:
            raise ValueError("Merge needs at least one pipeline config.")
        for c in self.pipeline_configs:
            if not isinstance(c, PipelineConfig):
                raise TypeError(f"Merge takes PipelineConfig objects, got {type(c).__name__}")
        if self.op is not None and not callable(self.op):
            raise TypeError(f"the merge op must be an async function, got {type(self.op).__name__}")
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"the merge name must be a non-empty str, got {self.name!r}")

    def __repr__(self):
        args = []
        if self.name != "merge":
            args.append(f"name={self.name!r}")
        if self.op is not None:
            args.append(f"op={_locate(self.op)}")
        head = f"Merge({', '.join(args)}," if args else "Merge("
        inner = "\n".join(_indent(repr(c), "    ") for c in self.pipeline_configs)
        return f"{head}\n{inner}\n)"


def Merge(  # noqa: N802 (SPDL's name)
    pipeline_configs: Sequence[PipelineConfig],
    op: Callable | None = None,
    *,
    name: str = "merge",
) -> MergeConfig:
    """Merges the outputs of several pipelines into one stream.

    Each config is a pipeline whose sink is ignored. Without ``op``, the
    engine merges them natively: items in the order they arrive; in continuous
    mode every input finishes an epoch before the merged epoch ends.

    ``op`` is a custom merge, as in SPDL: ``async def op(info, input_queues,
    output_queue)`` with one ``asyncio.Queue`` per input. It takes items
    from the inputs (each input ends with an item for which
    :func:`~feedline.pipeline.is_eof` is true) and puts what it emits
    into ``output_queue``; it may return early. ``info`` is the merge stage's
    :class:`~feedline.pipeline.StageInfo`. The op runs on the pipeline's event
    loop; with a continuous source it runs once per epoch.

    ``name`` names the merge stage in reprs, statistics and errors.
    """
    if not pipeline_configs:
        raise ValueError("Merge needs at least one pipeline config.")
    return MergeConfig(pipeline_configs=list(pipeline_configs), op=op, name=name, defined_at=caller_location())


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in text.splitlines())


_STAGE_TYPES = (PipeConfig, AggregateConfig, DisaggregateConfig)


@dataclasses.dataclass(frozen=True)
class PathVariantsConfig(Subscriptable):
    """Routes each item down one of several paths of stages, then merges the
    paths back into one stream. Made by :func:`PathVariants`."""

    name: str
    router: Callable
    paths: Sequence[Sequence[PipeConfig | AggregateConfig | DisaggregateConfig | PathVariantsConfig]]
    batched: bool = False
    defined_at: str | None = _defined_at()

    def __repr__(self):
        args = [f"path{i}=[{', '.join(repr(s) for s in path)}]" for i, path in enumerate(self.paths)]
        if self.batched:
            args.insert(0, "batched=True")
        head = "PathVariants" if self.name == "path_variants" else f"PathVariants[{self.name}]"
        return f"{head}({', '.join(args)})"


def _map_stages(stages, fn) -> list:
    """``stages`` with ``fn(stage)`` in place of each stage, the stages of a
    path variant's paths included (``fn`` never sees the PathVariantsConfig
    itself)."""
    out = []
    for s in stages:
        if isinstance(s, PathVariantsConfig):
            out.append(dataclasses.replace(s, paths=[_map_stages(path, fn) for path in s.paths]))
        else:
            out.append(fn(s))
    return out


def PathVariants(  # noqa: N802 (SPDL's name)
    router: Callable,
    paths: Sequence[Sequence[PipeConfig | AggregateConfig | DisaggregateConfig | PathVariantsConfig]],
    name: str | None = None,
    batched: bool = False,
) -> PathVariantsConfig:
    """A stage that sends each item down one of ``paths`` and merges them back.

    ``router(item) -> int`` picks the path (an index into ``paths``; a sync or
    ``async def`` function). Each path is a non-empty list of stages
    (:func:`Pipe`, :func:`Aggregate`, :func:`Disaggregate` or a nested
    :func:`PathVariants`); paths may differ in length. The merge emits items
    as the paths finish them. The router's errors, and an index out of range,
    fail the pipeline.

    With ``batched=True`` the stage takes batches (lists): ``router(batch)``
    returns one index per element, each path gets one list per batch (empty
    when no element goes its way) and must return one list for it, and the
    merge concatenates the paths' lists in path order (an empty result is
    dropped).
    """
    if not callable(router):
        raise TypeError(f"the router must be callable, got {type(router).__name__}")
    if isinstance(paths, (str, bytes)) or not isinstance(paths, Sequence) or not paths:
        raise ValueError("PathVariants needs at least one path (a list of stage lists)")
    checked = []
    for i, path in enumerate(paths):
        if isinstance(path, (str, bytes)) or not isinstance(path, Sequence) or not path:
            raise ValueError(f"path {i} of PathVariants must be a non-empty list of stages")
        for stage in path:
            if not isinstance(stage, (*_STAGE_TYPES, PathVariantsConfig)):
                raise TypeError(
                    f"path {i} of PathVariants: a path holds Pipe, Aggregate, Disaggregate or "
                    f"PathVariants stages, got {type(stage).__name__}"
                )
        checked.append(list(path))
    return PathVariantsConfig(
        name=name or "path_variants",
        router=router,
        paths=checked,
        batched=bool(batched),
        defined_at=caller_location(),
    )


# -- placement: which process runs a span of stages -----------------------------------


@dataclasses.dataclass(frozen=True)
class ExecutorConfig(Subscriptable):
    """Where the stages after a ``to()`` run: a pool of ``max_workers``
    workers (default: the number of CPUs), each running those stages as a
    pipeline of its own; ``initializer(*initargs)`` runs first in each."""

    max_workers: int | None = None
    initializer: Callable | None = None
    initargs: tuple = ()

    def __post_init__(self):
        if self.max_workers is not None and (
            isinstance(self.max_workers, bool) or not isinstance(self.max_workers, int) or self.max_workers < 1
        ):
            raise ValueError(f"max_workers must be an int >= 1 or None, got {self.max_workers!r}")
        if self.initializer is not None and not callable(self.initializer):
            raise TypeError(f"initializer must be callable, got {type(self.initializer).__name__}")


@dataclasses.dataclass(frozen=True)
class ProcessPoolExecutorConfig(ExecutorConfig):
    """Workers are processes, started with ``mp_context`` (default
    ``"forkserver"``)."""

    mp_context: str | None = None


@dataclasses.dataclass(frozen=True)
class InterpreterPoolExecutorConfig(ExecutorConfig):
    """Workers are subinterpreters (Python 3.14 and later)."""


class _MainProcess:
    """The main process as a placement target: ``to(MAIN_PROCESS)`` ends a
    region."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self):
        return "MAIN_PROCESS"

    def __reduce__(self):
        return (_MainProcess, ())


MAIN_PROCESS = _MainProcess()


@dataclasses.dataclass(frozen=True)
class PlacementConfig(Subscriptable):
    """Marks where the following stages run (``PipelineBuilder.to()``)."""

    target: ExecutorConfig | _MainProcess
    name: str = "placement"
    defined_at: str | None = _defined_at()

    def __post_init__(self):
        if not isinstance(self.target, (ExecutorConfig, _MainProcess)):
            raise TypeError(
                "to() takes a ProcessPoolExecutorConfig, an InterpreterPoolExecutorConfig or MAIN_PROCESS"
                + (
                    "; to run one stage on a concurrent.futures executor, use pipe(op, executor=...)"
                    if hasattr(self.target, "submit")
                    else f", got {type(self.target).__name__}"
                )
            )

    def __repr__(self):
        return f"placement({self.target!r})"


@dataclasses.dataclass(frozen=True)
class PipelineConfig(Subscriptable):
    """A whole pipeline: source (or merge), processing stages, sink."""

    src: SourceConfig | MergeConfig
    pipes: Sequence[PipeConfig | AggregateConfig | DisaggregateConfig | PathVariantsConfig | PlacementConfig] = ()
    sink: SinkConfig | None = None

    def __post_init__(self):
        if not isinstance(self.src, (SourceConfig, MergeConfig)):
            raise TypeError(f"src must be a SourceConfig or MergeConfig, got {type(self.src).__name__}")
        for p in self.pipes:
            if not isinstance(p, (*_STAGE_TYPES, PathVariantsConfig, PlacementConfig)):
                raise TypeError(
                    f"pipes must be Pipe/Aggregate/Disaggregate/PathVariants/Placement configs, got {type(p).__name__}"
                )

    def __repr__(self):
        src = repr(self.src)
        lines = ["PipelineConfig", " - Source:" + ("\n" + _indent(src, "   ") if "\n" in src else " " + src)]
        lines.append(" - Pipes:")
        lines.extend(f"   - {p!r}" for p in self.pipes)
        lines.append(f" - Sink: {self.sink!r}")
        return "\n".join(lines)
