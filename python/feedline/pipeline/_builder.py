"""PipelineBuilder: the fluent way to describe a linear pipeline."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction

from ._build import build_pipeline
from ._common import Subscriptable
from ._pipeline import Pipeline
from .defs import (
    Aggregate,
    Aggregator,
    Disaggregate,
    PathVariants,
    Pipe,
    PipelineConfig,
    PlacementConfig,
    SinkConfig,
    SourceConfig,
    _indent,
)

__all__ = ["PipelineBuilder"]


class PipelineBuilder(Subscriptable):
    """Describes a pipeline step by step, then builds it.

    Example::

        pipeline = (
            PipelineBuilder()
            .add_source(paths)
            .pipe(read, concurrency=8)
            .pipe(decode, concurrency=4)
            .aggregate(32)
            .add_sink(3)
            .build(num_threads=8)
        )
        with pipeline.auto_stop():
            for batch in pipeline:
                ...
    """

    def __init__(self):
        self._src = None
        self._pipes = []
        self._sink = None

    def add_source(self, source, *, continuous: bool = False, resumable: bool = False) -> PipelineBuilder:
        """Sets the source: an iterable, an async iterable or a NativeSource.
        With ``continuous=True`` it is iterated once per epoch, forever.
        With ``resumable=True`` (feedline's addition; ``source`` must have
        ``state_dict()``/``load_state_dict()``) the pipeline can be
        checkpointed with ``Pipeline.state_dict()`` (docs/python.md
        "Resumable pipelines")."""
        if self._src is not None:
            raise ValueError("Source already set.")
        self._src = SourceConfig(source, continuous=continuous, resumable=resumable)
        return self

    def pipe(
        self,
        op,
        /,
        *,
        concurrency: int = 1,
        executor=None,
        name: str | None = None,
        output_order: str = "completion",
        max_failures: int | Fraction | None = None,
    ) -> PipelineBuilder:
        """Adds a stage applying ``op`` to every item (see :func:`defs.Pipe`)."""
        self._pipes.append(
            Pipe(
                op,
                concurrency=concurrency,
                executor=executor,
                name=name,
                output_order=output_order,
                max_failures=max_failures,
            )
        )
        return self

    def aggregate(self, input: int | Aggregator, /, *, drop_last: bool = False) -> PipelineBuilder:  # noqa: A002
        """Adds a batching stage (see :func:`defs.Aggregate`)."""
        self._pipes.append(Aggregate(input, drop_last=drop_last))
        return self

    def disaggregate(self) -> PipelineBuilder:
        """Adds a stage that splits batches into items."""
        self._pipes.append(Disaggregate())
        return self

    def path_variants(
        self,
        router: Callable,
        paths: Sequence[Sequence],
        name: str | None = None,
        batched: bool = False,
    ) -> PipelineBuilder:
        """Adds a stage that routes each item down one of ``paths`` (lists
        of stage configs) and merges them back (see :func:`defs.PathVariants`)."""
        self._pipes.append(PathVariants(router, paths, name=name, batched=batched))
        return self

    def to(self, target) -> PipelineBuilder:
        """Runs the following stages in ``target``: a
        ``ProcessPoolExecutorConfig(max_workers=N)`` starts a region whose
        stages run in N worker processes, each as a pipeline of its own;
        ``to(MAIN_PROCESS)`` ends it. Only a region's inputs and outputs
        cross between processes (docs/python.md "Regions")."""
        self._pipes.append(PlacementConfig(target))
        return self

    def add_sink(self, buffer_size: int = 3) -> PipelineBuilder:
        """Sets the output buffer: up to ``buffer_size`` items wait for the
        consumer."""
        if self._sink is not None:
            raise ValueError("Sink is already set.")
        self._sink = SinkConfig(buffer_size)
        return self

    def get_config(self) -> PipelineConfig:
        """The :class:`PipelineConfig` described so far."""
        if self._src is None:
            raise RuntimeError("Source is not set.")
        if self._sink is None:
            raise RuntimeError("Sink is not set.")
        from ._regions import fuse

        fuse(self._pipes)  # checks the regions
        return PipelineConfig(src=self._src, pipes=list(self._pipes), sink=self._sink)

    def build(self, *, num_threads: int, **kwargs) -> Pipeline:
        """Builds the pipeline (not started); keyword arguments as
        :func:`build_pipeline`."""
        return build_pipeline(self.get_config(), num_threads=num_threads, **kwargs)

    def __repr__(self):
        """The description so far, also before the source or sink is set."""
        src = "(not set)" if self._src is None else repr(self._src)
        lines = ["PipelineBuilder", " - Source:" + ("\n" + _indent(src, "   ") if "\n" in src else " " + src)]
        lines.append(" - Pipes:")
        lines.extend(f"   - {p!r}" for p in self._pipes)
        lines.append(f" - Sink: {'(not set)' if self._sink is None else repr(self._sink)}")
        return "\n".join(lines)

    __str__ = __repr__
