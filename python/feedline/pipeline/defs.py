"""Building blocks of a pipeline description, as plain config objects.

The same classes and helpers as ``spdl.pipeline.defs``: a
:class:`PipelineConfig` is a source (:class:`SourceConfig` or a
:class:`MergeConfig` of other pipelines), a list of processing stages
(:func:`Pipe`, :func:`Aggregate`, :func:`Disaggregate`) and a
:class:`SinkConfig`. :func:`feedline.pipeline.build_pipeline` turns one into a
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

__all__ = [
    "Aggregate",
    "AggregateConfig",
    "Aggregator",
    "Collate",
    "Disaggregate",
    "DisaggregateConfig",
    "Merge",
    "MergeConfig",
    "Pipe",
    "PipeConfig",
    "PipelineConfig",
    "SinkConfig",
    "SourceConfig",
]


def _locate(obj) -> str:
    """``module.name at file:line`` for functions, the class name otherwise."""
    target = obj
    while isinstance(target, functools.partial):
        target = target.func
    name = getattr(target, "__qualname__", None) or type(target).__name__
    module = getattr(target, "__module__", None)
    try:
        file = inspect.getsourcefile(target)
        line = inspect.getsourcelines(target)[1]
        where = f" at {file}:{line}"
    except (TypeError, OSError):
        where = ""
    return f"{module}.{name}{where}" if module else f"{name}{where}"


def _source_repr(src) -> str:
    if isinstance(src, NativeSource):
        return repr(src)
    return f"<{type(src).__name__} object at {id(src):#x}>"


@dataclasses.dataclass(frozen=True)
class SourceConfig:
    """The source of a pipeline: an iterable, an async iterable or a
    :class:`~feedline.pipeline.NativeSource`.

    With ``continuous=True`` the source is iterated again and again; each pass
    is one epoch, and each ``for x in pipeline`` reads one epoch.
    """

    source: Iterable | AsyncIterable | NativeSource
    continuous: bool = False

    def __post_init__(self):
        s = self.source
        if not (isinstance(s, NativeSource) or hasattr(s, "__iter__") or hasattr(s, "__aiter__")):
            raise ValueError(
                f"Source must be an iterable, an async iterable or a NativeSource; got {type(s).__name__}."
            )

    def __repr__(self):
        cont = ", continuous=True" if self.continuous else ""
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
class PipeConfig:
    """One processing stage: ``op`` applied to every item. Made by :func:`Pipe`."""

    name: str
    op: Callable | NativeOp
    concurrency: int = 1
    executor: Any = None
    output_order: str = "completion"
    max_failures: int | Fraction | None = None

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


class Aggregator(ABC):
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
class AggregateConfig:
    """Batches items. Made by :func:`Aggregate`."""

    name: str
    op: int | Aggregator
    drop_last: bool = False

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
    return AggregateConfig(name=name, op=input, drop_last=drop_last)


@dataclasses.dataclass(frozen=True)
class DisaggregateConfig:
    """Splits each batch into its items. Made by :func:`Disaggregate`."""

    name: str = "disaggregate"

    def __repr__(self):
        return self.name


def Disaggregate() -> DisaggregateConfig:  # noqa: N802
    """A stage that splits each batch (a list or other iterable) into items."""
    return DisaggregateConfig()


@dataclasses.dataclass(frozen=True)
class SinkConfig:
    """The output buffer the consumer reads from (``buffer_size`` >= 1 items)."""

    buffer_size: int

    def __post_init__(self):
        if isinstance(self.buffer_size, bool) or not isinstance(self.buffer_size, int) or self.buffer_size < 1:
            raise ValueError(f"buffer_size must be an int >= 1, got {self.buffer_size!r}")


@dataclasses.dataclass(frozen=True)
class MergeConfig:
    """Several pipelines (without sinks) merged into one stream, items in
    arrival order. Made by :func:`Merge`."""

    pipeline_configs: Sequence[PipelineConfig]
    name: str = "merge"

    def __repr__(self):
        inner = "\n".join(_indent(repr(c), "    ") for c in self.pipeline_configs)
        return f"Merge(\n{inner}\n)"


def Merge(pipeline_configs: Sequence[PipelineConfig], op=None) -> MergeConfig:  # noqa: N802
    """Merges the outputs of several pipelines into one stream.

    Each config is a pipeline without processing limits of its own; its sink
    is ignored. Items come in the order they arrive; in continuous mode, every
    input must finish an epoch before the merged epoch ends. A custom merge
    ``op`` (SPDL's asyncio-queue protocol) is not supported: feedline merges
    natively.
    """
    if op is not None:
        raise NotImplementedError(
            "feedline merges natively; a custom merge op is not supported. "
            "Merge the pipelines and re-order items in a following pipe instead."
        )
    if not pipeline_configs:
        raise ValueError("Merge needs at least one pipeline config.")
    for c in pipeline_configs:
        if not isinstance(c, PipelineConfig):
            raise TypeError(f"Merge takes PipelineConfig objects, got {type(c).__name__}")
    return MergeConfig(pipeline_configs=list(pipeline_configs))


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in text.splitlines())


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    """A whole pipeline: source (or merge), processing stages, sink."""

    src: SourceConfig | MergeConfig
    pipes: Sequence[PipeConfig | AggregateConfig | DisaggregateConfig] = ()
    sink: SinkConfig | None = None

    def __post_init__(self):
        if not isinstance(self.src, (SourceConfig, MergeConfig)):
            raise TypeError(f"src must be a SourceConfig or MergeConfig, got {type(self.src).__name__}")
        for p in self.pipes:
            if not isinstance(p, (PipeConfig, AggregateConfig, DisaggregateConfig)):
                raise TypeError(f"pipes must be Pipe/Aggregate/Disaggregate configs, got {type(p).__name__}")

    def __repr__(self):
        src = repr(self.src)
        lines = ["PipelineConfig", " - Source:" + ("\n" + _indent(src, "   ") if "\n" in src else " " + src)]
        lines.append(" - Pipes:")
        lines.extend(f"   - {p!r}" for p in self.pipes)
        lines.append(f" - Sink: {self.sink!r}")
        return "\n".join(lines)
