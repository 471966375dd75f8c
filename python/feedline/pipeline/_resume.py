"""Resumable pipelines: each item of a resumable source carries its pass and
position through the stages, so that ``Pipeline.state_dict()`` knows which
items the consumer has received (or that failed or were dropped) and a
rebuilt pipeline skips them.

Through Python stages an item travels as ``(pass, positions, value)``; the
wrappers here call the user's op on ``value`` and mark the positions done
when the op fails or returns None. Through native ops the position rides as
one more field of the sample (see :mod:`._carry`). The same machinery serves
:class:`feedline.dataloader.DataLoader`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .._feedline_ext import NativeOp
from ._carry import DroppedTag, Run, Samples, Tag
from ._progress import Progress, Tracker
from .defs import (
    AggregateConfig,
    DisaggregateConfig,
    MergeConfig,
    PathVariantsConfig,
    PipeConfig,
    PipelineConfig,
    SourceConfig,
    _call_target,
)

STATE_VERSION = 1

Decoded = tuple[int, tuple[int, ...], Any]


def untag(value: Any) -> Decoded:
    """A value handed on by a tagging wrapper (or a raw tagged source item)
    -> (pass, positions, the user's value)."""
    epoch, positions, item = value
    if isinstance(positions, int):
        positions = (positions,)
    return epoch, positions, item


def rows_of(decode: Callable[[Any], Decoded]) -> Callable[[list[Any]], Decoded]:
    """The decoder of a batch (a list) of values each decoded by ``decode``."""

    def rows(items: list[Any]) -> Decoded:
        decoded = [decode(v) for v in items]
        return decoded[0][0], tuple(p for _, ps, _ in decoded for p in ps), [v for _, _, v in decoded]

    return rows


def _no_context(epoch: int, positions: tuple[int, ...]) -> contextlib.AbstractContextManager[None]:
    return contextlib.nullcontext()


Around = Callable[[int, tuple[int, ...]], contextlib.AbstractContextManager[Any]]


def tag_op(
    fn: Callable[[Any], Any],
    tracker: Tracker,
    decode: Callable[[Any], Decoded] = untag,
    around: Around = _no_context,
) -> Callable[..., Any]:
    """``fn`` (sync or async) on the user's value of a tagged input; its
    result tagged with the same positions. A failure or a None result marks
    the positions done. ``around(pass, positions)`` is a context each call
    runs in (DataLoader's per-item random state)."""
    if inspect.iscoroutinefunction(_call_target(fn)):

        @functools.wraps(fn)
        async def atagged(value: Any) -> Any:
            epoch, positions, item = decode(value)
            try:
                with around(epoch, positions):
                    out = await fn(item)
            except asyncio.CancelledError:
                raise  # stopped, not done: a resumed run gives the item again
            except BaseException:
                tracker.mark(epoch, positions)
                raise
            if out is None:
                tracker.mark(epoch, positions)
                return None
            return (epoch, positions, out)

        return atagged

    @functools.wraps(fn)
    def tagged(value: Any) -> Any:
        epoch, positions, item = decode(value)
        try:
            with around(epoch, positions):
                out = fn(item)
        except BaseException:
            tracker.mark(epoch, positions)
            raise
        if out is None:
            tracker.mark(epoch, positions)
            return None
        return (epoch, positions, out)

    return tagged


def carry_op(
    fn: Callable[[Any], Any], samples: Samples, tracker: Tracker, around: Around = _no_context
) -> Callable[..., Any]:
    """A Python op between native ones: takes and gives samples that carry
    their tags (the tag stays armed, see _carry.DroppedTag)."""
    inner = tag_op(fn, tracker, around=around)

    def rewrap(tag: Tag, out: Any) -> Any:
        return None if out is None else samples.wrap(out[2], tag)

    if inspect.iscoroutinefunction(inner):

        @functools.wraps(fn)
        async def acarry(carrier: Any) -> Any:
            tag, item = samples.split(carrier)
            return rewrap(tag, await inner((tag.epoch, tag.position, item)))

        return acarry

    @functools.wraps(fn)
    def carry(carrier: Any) -> Any:
        tag, item = samples.split(carrier)
        return rewrap(tag, inner((tag.epoch, tag.position, item)))

    return carry


class TaggedSource:
    """The resumable source, one pass per ``__iter__``, each item tagged by
    ``tag(pass, position, item)``. Records the source's state at the start
    of each pass (taken right after ``iter(source)``). A restored pipeline
    first runs ``discard`` whole passes (a checkpoint taken after a pass
    ended and before the next began), then skips the done positions."""

    def __init__(self, src: Any, tag: Callable[[int, int, Any], Any], continuous: bool) -> None:
        self.src = src
        self.continuous = continuous
        self.tag = tag
        self.next_pass = 0
        self.discard = 0
        self.skip: Progress | None = None
        self.starts: dict[int, dict[str, Any]] = {}

    def __iter__(self) -> Iterator[Any]:
        discard, self.discard = self.discard, 0
        for _ in range(discard):
            for _item in self.src:
                pass
        if discard and not self.continuous:
            return  # the only pass had ended
        number, self.next_pass = self.next_pass, self.next_pass + 1
        skip, self.skip = self.skip, None
        it = iter(self.src)
        self.starts[number] = self.src.state_dict()
        tag = self.tag
        for position, item in enumerate(it):
            if skip is not None and position in skip:
                continue
            yield tag(number, position, item)

    def __repr__(self) -> str:
        return repr(self.src)


class Resume:
    """A resumable pipeline's bookkeeping, held by its :class:`Pipeline`."""

    def __init__(self, source: Any, continuous: bool, unsupported: str | None = None) -> None:
        self.source = source
        self.continuous = continuous
        self.unsupported = unsupported  # why state_dict() cannot work
        self.tracker = Tracker()
        self.decode: Callable[[Any], Decoded] = untag
        self.through = False  # input order everywhere, tags not marking
        self.run: Run | None = None
        self.tagged: TaggedSource | None = None
        self.current = 0  # the pass the consumer reads

    def deliver(self, value: Any) -> Any:
        epoch, positions, item = self.decode(value)
        if self.through:
            self.tracker.mark_through(epoch, max(positions))
        else:
            self.tracker.mark(epoch, positions)
        return item

    def end_pass(self) -> None:
        """The consumer reached the end of the pass it reads."""
        if not self.continuous and self.current >= 1:
            return  # the only pass ended already
        self.tracker.finish(self.current)
        self.current += 1
        if self.tagged is not None:
            starts = self.tagged.starts
            for old in [k for k in list(starts) if k < self.current - 1]:
                starts.pop(old, None)

    def check(self) -> TaggedSource:
        if self.unsupported is not None:
            raise ValueError(f"this pipeline cannot be checkpointed: {self.unsupported}")
        assert self.tagged is not None
        return self.tagged

    def state_dict(self) -> dict[str, Any]:
        tagged = self.check()
        current = self.current
        starts = dict(list(tagged.starts.items()))  # the source thread adds passes
        start = max((k for k in starts if k <= current), default=None)
        if start is None:  # no pass began yet
            start, source = current, self.source.state_dict()
        else:
            source = starts[start]
        state = self.tracker.state(current)
        return {
            "version": STATE_VERSION,
            "pass": current,
            "source_pass": start,
            "source": source,
            "position": state["position"],
            "done": state["done"],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        from ..source._checks import check_int, check_state

        tagged = self.check()
        state = check_state(state, "Pipeline", ("version", "pass", "source_pass", "source", "position"))
        if state["version"] != STATE_VERSION:
            raise ValueError(f"Pipeline state version {state['version']!r} is not supported (expected {STATE_VERSION})")
        current = check_int("pass", state["pass"], minimum=0)
        start = check_int("source_pass", state["source_pass"], minimum=0)
        if start > current:
            raise ValueError(f"source_pass must be <= pass ({current}), got {start}")
        epoch, progress = Tracker.parse(
            {"epoch": current, "position": state["position"], "done": state.get("done", [])}
        )
        self.source.load_state_dict(state["source"])
        self.current = current
        self.tracker.set(current, progress)
        tagged.discard = current - start
        tagged.starts = {start: dict(state["source"])}
        tagged.next_pass = current
        tagged.skip = progress.copy()


def _unsupported(stage: Any, why: str) -> str:
    name = getattr(stage, "name", type(stage).__name__)
    return f"stage {name!r} ({why}) has no item positions yet"


def prepare(config: PipelineConfig) -> tuple[PipelineConfig, Resume]:
    """The config to build for a resumable source (items tagged, ops
    wrapped) and its bookkeeping. Where a stage cannot pass positions on,
    the config is built as it is and ``state_dict()`` raises naming it."""
    src = config.src
    assert isinstance(src, SourceConfig) and src.resumable
    resume = Resume(src.source, src.continuous)
    reason = _check_stages(config)
    if reason is not None:
        resume.unsupported = reason
        return config, resume
    natives = [p for p in config.pipes if isinstance(p, PipeConfig) and isinstance(p.op, NativeOp)]
    ordered = all(p.output_order == "input" for p in config.pipes if isinstance(p, PipeConfig))
    tracker = resume.tracker
    samples: Samples | None = None
    if natives:
        fields = [getattr(p.op, "field", None) for p in natives]
        field = next((f for f in fields if f is not None), None)
        for native, f in zip(natives, fields):
            batch = getattr(native.op, "input_type", None) == "list"
            if (f is None and not batch) or (f is not None and f != field) or not isinstance(field, (int, str)):
                return _fail(config, resume, native, "native ops must all work on one sample field (NativeOp.field)")
        assert isinstance(field, (int, str))
        samples = Samples(field)
    if samples is None:
        tag: Callable[[int, int, Any], Any] = lambda e, p, item: (e, p, item)  # noqa: E731
    elif ordered:
        resume.through = True
        tag = lambda e, p, item: samples.wrap(item, Tag(e, p))  # noqa: E731
    else:
        run = resume.run = Run(tracker)
        tag = lambda e, p, item: samples.wrap(item, DroppedTag(e, p, run))  # noqa: E731
    # What the last stage gives: "sample"/"rows" (carriers native ops take)
    # or "value" (tagged tuples), and how to decode it.
    kind = "value" if samples is None else "sample"
    decode: Callable[[Any], Decoded] = untag if samples is None else samples.unwrap
    pipes: list[Any] = []
    for i, stage in enumerate(config.pipes):
        native_after = any(isinstance(p, PipeConfig) and isinstance(p.op, NativeOp) for p in config.pipes[i + 1 :])
        if isinstance(stage, AggregateConfig):
            pipes.append(stage)
            if kind == "sample":
                kind = "rows"
                assert samples is not None
                decode = samples.unwrap_rows
            elif kind == "rows":
                return _fail(config, resume, stage, "a batch of batches of samples")
            else:
                decode = rows_of(decode)
            continue
        assert isinstance(stage, PipeConfig)
        op = stage.op
        if isinstance(op, NativeOp):
            batch = getattr(op, "input_type", None) == "list"
            if kind == "rows" and batch:
                assert samples is not None
                kind, decode = "columns", samples.unwrap_columns
            elif kind != "sample" or batch:
                return _fail(config, resume, stage, "a native op after a Python op that ends the samples")
            pipes.append(stage)
            continue
        if kind == "sample" and native_after:
            assert samples is not None
            pipes.append(dataclasses.replace(stage, op=carry_op(op, samples, tracker)))
            continue
        if kind in ("rows", "columns") and native_after:
            return _fail(config, resume, stage, "a Python op between native batch ops")
        pipes.append(dataclasses.replace(stage, op=tag_op(op, tracker, decode)))
        kind, decode = "value", untag
    resume.decode = decode
    resume.tagged = TaggedSource(src.source, tag, src.continuous)
    new_src = dataclasses.replace(src, source=resume.tagged, resumable=False)
    return dataclasses.replace(config, src=new_src, pipes=pipes), resume


def merge_resume(config: PipelineConfig) -> Resume | None:
    """A merge of pipelines one of which has a resumable source: a Resume
    whose state_dict() raises naming the merge (None: nothing resumable)."""
    src = config.src
    if not isinstance(src, MergeConfig):
        return None

    def resumable(c: PipelineConfig) -> bool:
        s = c.src
        if isinstance(s, MergeConfig):
            return any(resumable(sub) for sub in s.pipeline_configs)
        return s.resumable

    if not resumable(config):
        return None
    return Resume(None, False, _unsupported(src, "a merge of pipelines"))


def _fail(config: PipelineConfig, resume: Resume, stage: Any, why: str) -> tuple[PipelineConfig, Resume]:
    resume.unsupported = _unsupported(stage, why)
    return config, resume


def _check_stages(config: PipelineConfig) -> str | None:
    for stage in config.pipes:
        if isinstance(stage, DisaggregateConfig):
            return _unsupported(stage, "a disaggregate: one item, many outputs")
        if isinstance(stage, PathVariantsConfig):
            return _unsupported(stage, "a PathVariants")
        if isinstance(stage, AggregateConfig) and not isinstance(stage.op, int):
            return _unsupported(stage, "a custom Aggregator")
        if isinstance(stage, PipeConfig):
            op = stage.op
            if isinstance(op, NativeOp):
                if op.kind != "map":
                    return _unsupported(stage, "a native generator op: one item, many outputs")
                continue
            target = _call_target(op)
            if inspect.isgeneratorfunction(target) or inspect.isasyncgenfunction(target):
                return _unsupported(stage, "a generator op: one item, many outputs")
    return None
