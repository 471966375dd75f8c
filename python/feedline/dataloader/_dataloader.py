"""DataLoader: a source, a preprocessor, batching and a hand-off, on one
warm feedline pipeline that lives across epochs, with resumable state."""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from fractions import Fraction
from typing import Any, Generic, TypeVar

import numpy as np

from .._errors import PipelineFailure
from .._feedline_ext import _drain_released
from ..pipeline import NativeOp, Pipeline, PipelineBuilder
from ..pipeline._carry import DroppedTag, Run, Samples, Tag
from ..pipeline._progress import Progress, Tracker
from ..pipeline._resume import carry_op, rows_of
from ..pipeline._resume import tag_op as _tag_single
from ..pipeline._resume import untag as _untag
from ..source._checks import check_int, check_state
from ..source.utils import item_rng as _item_rng

__all__ = ["DataLoader", "item_rng"]

T = TypeVar("T")
U = TypeVar("U")

# (seed, epoch, position) of the item the current preprocessor call works on.
_ITEM_KEY: contextvars.ContextVar[tuple[int, int, int] | None] = contextvars.ContextVar(
    "feedline_dataloader_item", default=None
)

_STATE_VERSION = 1


def item_rng() -> np.random.Generator:
    """Inside a :class:`DataLoader` preprocessor: a NumPy Generator for the
    item being processed, determined by ``(seed, epoch, position)`` alone
    (:func:`feedline.source.item_rng`), so augmentations are the same at any
    thread count, in any completion order and after a resume.

    Raises:
        RuntimeError: called outside a DataLoader preprocessor.
    """
    key = _ITEM_KEY.get()
    if key is None:
        raise RuntimeError("item_rng() is only available inside a DataLoader preprocessor call")
    return _item_rng(*key)


class _Passes:
    """The continuous source: one pass over ``src`` per epoch, each item
    tagged by ``tag(epoch, position, item)`` (in counted mode, ``tag`` is
    None: the item alone). The first pass of a resumed loader skips the
    positions already done."""

    def __init__(
        self,
        src: Iterable[Any],
        first_epoch: int,
        resume: Progress | None,
        tag: Callable[[int, int, Any], Any] | None,
    ) -> None:
        self._src = src
        self._next_epoch = first_epoch
        self._resume = resume
        self._tag = tag

    def __iter__(self) -> Iterator[Any]:
        epoch, self._next_epoch = self._next_epoch, self._next_epoch + 1
        skip, self._resume = self._resume, None
        set_epoch = getattr(self._src, "set_epoch", None)
        if callable(set_epoch):
            set_epoch(epoch)
        tag = self._tag
        for position, item in enumerate(self._src):
            if skip is not None and position in skip:
                continue
            yield item if tag is None else tag(epoch, position, item)


def _carrying_field(pre: Any, agg: Any, batching: bool) -> int | str | None:
    """The sample field the loader's native ops work on, next to which an
    item's tag can ride along as one more field; None where it cannot: a
    native op that takes payloads only (``field=None``; except a batch op
    such as ``stack()`` after a native preprocessor, which takes the
    preprocessor's samples as they are), a generator op (one item, many
    outputs), or two native ops on different fields."""
    fields = set()
    for op in (pre, agg):
        if not isinstance(op, NativeOp):
            continue
        if op.kind != "map":
            return None
        # feedline.io.ops set `field`; another extension's op has none.
        field = getattr(op, "field", None)
        if field is not None:
            fields.add(field)
        elif not (op is agg and batching and op.input_type == "list" and isinstance(pre, NativeOp)):
            return None
    if len(fields) != 1:
        return None
    field = fields.pop()
    return field if isinstance(field, (int, str)) else None


class DataLoader(Generic[T, U]):
    """Iterates ``src`` through a feedline pipeline, one epoch per ``for``.

    The pipeline is ``src -> preprocessor [num_threads] -> batch(batch_size,
    drop_last) -> aggregator [num_threads] -> transfer_fn [1] -> buffer
    (buffer_size)``, built once and kept warm across epochs (the source runs
    continuously; the next epoch starts loading while the last batches of
    this one are consumed). Before each epoch's pass the loader calls
    ``src.set_epoch(epoch)`` if ``src`` has it (the samplers of
    :mod:`feedline.source`, :func:`~feedline.source.utils.embed_shuffle`,
    ``torch.utils.data.DistributedSampler``), so the order of every epoch is
    a function of its number.

    Args:
        src: an iterable of items (indices, paths, samples). It must give
            the same order for the same epoch number (see above).
        preprocessor: applied to every item on ``num_threads`` threads; a
            Python callable, an ``async def`` function or a
            :class:`~feedline.pipeline.NativeOp`. A ``None`` result drops the
            item; an exception is a failed item (dropped, counted, logged).
        batch_size: items per batch (None: no batching).
        drop_last: drop each epoch's last partial batch.
        aggregator: applied to each batch (a list); a callable or NativeOp.
        transfer_fn: applied to each batch, one call at a time (GPU copies).
        buffer_size: batches ready for the consumer.
        num_threads: threads of the pipeline (and concurrency of the
            preprocessor and aggregator).
        timeout: seconds a batch may take to arrive (None: no limit).
        output_order: ``"completion"`` (default) or ``"input"``.
        seed: the ``seed`` of :func:`item_rng` (feedline's addition).
        max_failures: failed calls tolerated before the pipeline fails (an
            int, -1 for unlimited, or a Fraction rate; see
            ``feedline.pipeline.build_pipeline``). Then the ``for`` raises
            :class:`feedline.PipelineFailure` after the batches that made it
            through, and the next ``for`` continues on a new pipeline from
            what was delivered (feedline's addition).

    Resumable (beyond SPDL): ``state_dict()`` is a few integers, ``{epoch,
    position, done, seed}``, counted from what the consumer has received;
    ``load_state_dict()`` makes the next ``for`` deliver exactly the items
    of that epoch not yet delivered: with ``output_order="input"`` the same
    sequence as an uninterrupted run, otherwise the same items (those in
    flight at the checkpoint are loaded again, never lost), at any thread
    count, and then the following epochs as usual. A ``for`` left early
    (``break``) is continued by the next ``for``. With a NativeOp
    preprocessor or aggregator, each item's position rides through the
    native ops as one more field of its sample (docs/ops.md "Samples") and
    is taken off before the item reaches the loop. Where it cannot (an op
    with ``field=None``, except a batch op after a native preprocessor; a
    generator op such as ``tar_members``; two native ops on different
    fields) the state counts delivered items ("counted mode"), which is
    exact only with ``output_order="input"`` when no item fails.
    """

    def __init__(
        self,
        src: Iterable[T],
        *,
        preprocessor: Callable[[T], U] | NativeOp | None = None,
        batch_size: int | None = None,
        drop_last: bool = False,
        aggregator: Callable[[list[U]], Any] | NativeOp | None = None,
        transfer_fn: Callable[[Any], Any] | None = None,
        buffer_size: int = 3,
        num_threads: int = 8,
        timeout: float | None = None,
        output_order: str = "completion",
        seed: int = 0,
        max_failures: int | Fraction = -1,
    ) -> None:
        if not hasattr(src, "__iter__"):
            raise ValueError(f"src must be an iterable, got {type(src).__name__}")
        if batch_size is not None:
            batch_size = check_int("batch_size", batch_size, minimum=1)
        self._buffer_size = check_int("buffer_size", buffer_size, minimum=1)
        self._num_threads = check_int("num_threads", num_threads, minimum=1)
        if timeout is not None and not (timeout > 0):
            raise ValueError(f"timeout must be > 0 seconds or None, got {timeout!r}")
        if output_order not in ("completion", "input"):
            raise ValueError(f"output_order must be 'completion' or 'input', got {output_order!r}")
        for name, fn in (("preprocessor", preprocessor), ("aggregator", aggregator), ("transfer_fn", transfer_fn)):
            if fn is not None and not (callable(fn) or isinstance(fn, NativeOp)):
                raise ValueError(f"{name} must be callable or a NativeOp, got {type(fn).__name__}")
        if hasattr(src, "__len__") and len(src) == 0:  # type: ignore[arg-type]
            shard = ""
            rank, world = getattr(src, "_rank", None), getattr(src, "_world_size", None)
            if isinstance(rank, int) and isinstance(world, int):
                shard = f": rank {rank} of world_size {world} gets no index (fewer items than ranks)"
            raise ValueError(f"src is empty (len() == 0){shard}")
        self._src = src
        self._preprocessor = preprocessor
        self._batch_size = batch_size
        self._drop_last = bool(drop_last)
        self._aggregator = aggregator
        self._transfer_fn = transfer_fn
        self._timeout = timeout
        self._output_order = output_order
        self._seed = check_int("seed", seed, minimum=0)
        if isinstance(max_failures, Fraction):
            if not 0 < max_failures <= 1:
                raise ValueError(f"a Fraction max_failures must be in (0, 1], got {max_failures}")
        else:
            max_failures = check_int("max_failures", max_failures, minimum=-1)
        self._max_failures = max_failures
        natives = isinstance(preprocessor, NativeOp) or isinstance(aggregator, NativeOp)
        # Items carry their position: as (epoch, position, item) through
        # Python ops, or as a sample field through native ones (carry mode).
        # Counted mode where a native op cannot carry it.
        field = _carrying_field(preprocessor, aggregator, batch_size is not None) if natives else None
        self._samples = Samples(field) if field is not None else None
        self._tagged = not natives or self._samples is not None
        # Counted mode with a generator op counts its outputs, not the
        # source's items: no count says where the epoch is.
        self._generator_op: str | None = next(
            (
                getattr(op, "name", type(op).__name__)
                for op in (preprocessor, aggregator)
                if isinstance(op, NativeOp) and op.kind != "map"
            ),
            None,
        )
        self._run: Run | None = None  # carry mode: the running pipeline's
        self._decode: Callable[[Any], tuple[int, tuple[int, ...], Any]] = _untag
        self._epoch = 0  # the epoch the consumer reads (or reads next)
        self._tracker = Tracker()
        self._resume: Progress | None = None  # skipped by the first pass of the next pipeline
        self._pipeline: Pipeline | None = None
        # The last ``for``'s iterator while it may be suspended: the next
        # ``for`` resumes it first (see __iter__).
        self._live: Iterator[Any] | None = None

    # -- sizes -----------------------------------------------------------------

    def __len__(self) -> int:
        """Batches per epoch (items without ``batch_size``): from ``len(src)``."""
        n = len(self._src)  # type: ignore[arg-type]
        if self._batch_size is None:
            return n
        return n // self._batch_size if self._drop_last else math.ceil(n / self._batch_size)

    def _src_len(self) -> int | None:
        """``len(src)``; None for a source without one."""
        try:
            return len(self._src)  # type: ignore[arg-type]
        except TypeError:
            return None

    @property
    def epoch(self) -> int:
        """The epoch the next (or current) ``for`` reads."""
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Makes the next ``for`` read epoch ``epoch`` from its start (a no-op
        when it is the current epoch, so calling it every epoch as with
        ``DistributedSampler`` is harmless)."""
        epoch = check_int("epoch", epoch, minimum=0)
        if epoch == self._epoch:
            return
        self._close_pipeline()
        self._epoch = epoch
        self._tracker.set(epoch, Progress())
        self._resume = None

    # -- the pipeline ------------------------------------------------------------

    def _build(self) -> Pipeline:
        if self._samples is not None:
            return self._build_carrying(self._samples)
        tagged, tracker, out_order, n = self._tagged, self._tracker, self._output_order, self._num_threads
        # In tagged mode neither op is native (see __init__).
        pre: Any = self._preprocessor
        agg_fn: Any = self._aggregator
        source = _Passes(self._src, self._epoch, self._resume, _plain_tag if tagged else None)
        self._resume = None
        b = PipelineBuilder().add_source(source, continuous=True)
        if self._preprocessor is not None:
            op = _tag_single(pre, tracker, around=_item_key(self._seed)) if tagged else pre
            b.pipe(op, concurrency=n, output_order=out_order, name="preprocess")
        if self._batch_size is not None:
            b.aggregate(self._batch_size, drop_last=self._drop_last)
            if tagged:
                b.pipe(_tag_batch(agg_fn, tracker), concurrency=n, output_order=out_order, name="aggregate")
        if self._aggregator is not None and not (tagged and self._batch_size is not None):
            agg = _tag_single(agg_fn, tracker) if tagged else agg_fn
            b.pipe(agg, concurrency=n, output_order=out_order, name="aggregate")
        if self._transfer_fn is not None:
            fn = _tag_single(self._transfer_fn, tracker) if tagged else self._transfer_fn
            b.pipe(fn, concurrency=1, name="transfer")
        self._decode = _untag
        return b.add_sink(self._buffer_size).build(num_threads=n, max_failures=self._max_failures)

    def _build_carrying(self, samples: Samples) -> Pipeline:
        """Carry mode: items are samples with a :class:`Tag` field through
        the native ops; Python ops unwrap and wrap them (a Python stage after
        the native ones hands on ``(epoch, positions, value)``). In
        completion order an item a native op fails on (or a batch op leaves
        out) is marked done when its tag is released; in input order a
        delivered item marks every earlier one."""
        tracker, out_order, n = self._tracker, self._output_order, self._num_threads
        run = self._run = Run(tracker)
        if out_order == "input":

            def tag(epoch: int, position: int, item: Any) -> Any:
                return samples.wrap(item, Tag(epoch, position))

        else:

            def tag(epoch: int, position: int, item: Any) -> Any:
                return samples.wrap(item, DroppedTag(epoch, position, run))

        source = _Passes(self._src, self._epoch, self._resume, tag)
        self._resume = None
        b = PipelineBuilder().add_source(source, continuous=True)
        # What the last stage so far gives: a function to (epoch, positions, value).
        decode: Callable[[Any], tuple[int, tuple[int, ...], Any]] = samples.unwrap
        pre: Any = self._preprocessor
        if isinstance(pre, NativeOp):
            b.pipe(pre, concurrency=n, output_order=out_order, name="preprocess")
        elif pre is not None:
            b.pipe(
                carry_op(pre, samples, tracker, around=_item_key(self._seed)),
                concurrency=n,
                output_order=out_order,
                name="preprocess",
            )
        agg: Any = self._aggregator
        if self._batch_size is not None:
            b.aggregate(self._batch_size, drop_last=self._drop_last)
            if isinstance(agg, NativeOp):
                b.pipe(agg, concurrency=n, output_order=out_order, name="aggregate")
                decode = samples.unwrap_columns
            elif agg is not None:
                b.pipe(
                    _tag_batch(agg, tracker, samples.unwrap_rows),
                    concurrency=n,
                    output_order=out_order,
                    name="aggregate",
                )
                decode = _untag
            else:
                decode = samples.unwrap_rows
        elif isinstance(agg, NativeOp):
            b.pipe(agg, concurrency=n, output_order=out_order, name="aggregate")
        elif agg is not None:
            b.pipe(_tag_single(agg, tracker, decode), concurrency=n, output_order=out_order, name="aggregate")
            decode = _untag
        if self._transfer_fn is not None:
            b.pipe(_tag_single(self._transfer_fn, tracker, decode), concurrency=1, name="transfer")
            decode = _untag
        self._decode = decode
        return b.add_sink(self._buffer_size).build(num_threads=n, max_failures=self._max_failures)

    def _close_pipeline(self) -> None:
        self._live = None
        if self._run is not None:
            # Whatever the pipeline drops from now on was not done.
            self._run.active = False
            self._run = None
        pipeline, self._pipeline = self._pipeline, None
        if pipeline is not None:
            try:
                pipeline.stop()
            except PipelineFailure:
                pass  # already raised to the consumer, or belonging to an abandoned run

    def close(self) -> None:
        """Stops the pipeline (the next ``for`` builds a new one and
        continues from the current state)."""
        self._close_pipeline()
        self._resume = self._tracker.get(self._epoch)

    def __enter__(self) -> DataLoader[T, U]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- iteration -----------------------------------------------------------

    def __iter__(self) -> Iterator[Any]:
        if self._pipeline is None:
            if self._resume is None:
                self._resume = self._tracker.get(self._epoch)
            self._pipeline = self._build()
        return self._pass(self._pipeline)

    def _pass(self, pipeline: Pipeline) -> Iterator[Any]:
        """One ``for``: the rest of an epoch an earlier ``for`` left, or a
        whole epoch.

        A ``for`` that stops after the last batch without asking for the
        next (``zip(range(len(loader)), loader)``, ``islice``, a ``break``
        at the last step) leaves its iterator suspended before the epoch's
        end; a new iterator on the pipeline would read only that end, and
        the next ``for`` would be empty. So the next ``for`` resumes the
        suspended iterator first: if the epoch had values left (a
        ``break``), that ``for`` is their rest; if not, it ends the epoch
        and reads the next one. (Plain ``for`` loops, not ``yield from``:
        closing this generator must leave the inner one suspended.)"""
        live = self._live
        if live is not None:
            resumed = False
            for value in live:
                resumed = True
                yield value
            if self._live is live:
                self._live = None
            if resumed or self._pipeline is not pipeline:
                return
        items = self._epoch_items(pipeline)
        self._live = items
        for value in items:
            yield value
        if self._live is items:
            self._live = None

    def _epoch_items(self, pipeline: Pipeline) -> Iterator[Any]:
        tracker, epoch = self._tracker, self._epoch
        try:
            if self._tagged:
                decode = self._decode
                # Carry mode in input order: a delivered item marks every
                # earlier one of its epoch (see _build_carrying).
                through = self._samples is not None and self._output_order == "input"
                for tagged in pipeline.get_iterator(timeout=self._timeout):
                    item_epoch, positions, value = decode(tagged)
                    if through:
                        tracker.mark_through(item_epoch, max(positions))
                    else:
                        tracker.mark(item_epoch, positions)
                    yield value
            else:
                # Every batch stands for batch_size items of the source
                # (those an op left out of it included); its len() would
                # be that of a tuple or dict of columns.
                per_value = self._batch_size if self._batch_size is not None else 1
                for value in pipeline.get_iterator(timeout=self._timeout):
                    tracker.add_count(epoch, per_value)
                    yield value
        except PipelineFailure:
            # The pipeline is dead; the next `for` builds a new one and
            # continues from what was delivered.
            self._close_pipeline()
            self._resume = tracker.get(epoch)
            raise
        tracker.finish(epoch)
        self._epoch = epoch + 1

    # -- state -------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """``{"version", "epoch", "position", "done", "seed"}``: the epoch
        being read, the count of its leading items done (delivered, failed
        or dropped), the runs of later items done, and the item seed."""
        if self._run is not None:
            _drain_released()  # tags released by native threads mark failed items
        state = self._tracker.state(self._epoch)
        if not self._tagged and self._generator_op is not None and state["position"]:
            raise ValueError(
                f"DataLoader.state_dict(): the native op {self._generator_op} gives many outputs per item, "
                "so the count of what was delivered does not say which items of the epoch are done; take the "
                "state between epochs (after a `for` ends), or before the epoch's first value"
            )
        state["seed"] = self._seed
        state["version"] = _STATE_VERSION
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restores a ``state_dict()``; the next ``for`` continues that epoch.
        Stops a running pipeline first."""
        state = check_state(state, "DataLoader", ("epoch", "position"))
        version = state.get("version", _STATE_VERSION)
        if version != _STATE_VERSION:
            raise ValueError(f"DataLoader state version {version!r} is not supported (expected {_STATE_VERSION})")
        epoch, progress = Tracker.parse(state)
        if not self._tagged and progress.above:
            raise ValueError("done must be empty for a DataLoader whose ops are native (counted mode)")
        seed = check_int("seed", state.get("seed", self._seed), minimum=0)
        size = self._src_len()
        if size is not None and progress.low >= size > 0:
            # Saved after an epoch's last value, before its `for` saw the
            # end: as a live loader would (see _pass()), the next `for`
            # reads the next epoch, not an empty rest of this one.
            epoch, progress = epoch + 1, Progress()
        self._close_pipeline()
        self._epoch, self._seed = epoch, seed
        self._tracker.set(epoch, progress)
        self._resume = progress.copy()

    def __repr__(self) -> str:
        return (
            f"DataLoader(src={type(self._src).__name__}, batch_size={self._batch_size}, "
            f"num_threads={self._num_threads}, output_order={self._output_order!r}, epoch={self._epoch})"
        )


# -- op wrappers: carry (epoch, positions) past the user's functions ---------------


def _plain_tag(epoch: int, position: int, item: Any) -> tuple[int, int, Any]:
    return (epoch, position, item)


def _item_key(seed: int) -> Callable[[int, tuple[int, ...]], contextlib.AbstractContextManager[None]]:
    """The context of a preprocessor call: item_rng()'s (seed, epoch, position)."""

    @contextlib.contextmanager
    def around(epoch: int, positions: tuple[int, ...]) -> Iterator[None]:
        token = _ITEM_KEY.set((seed, epoch, positions[0]))
        try:
            yield
        finally:
            _ITEM_KEY.reset(token)

    return around


_untag_rows = rows_of(_untag)


def _tag_batch(
    aggregator: Callable[[list[Any]], Any] | None,
    tracker: Tracker,
    decode: Callable[[list[Any]], tuple[int, tuple[int, ...], list[Any]]] = _untag_rows,
) -> Callable[..., Any]:
    if aggregator is not None:
        return _tag_single(aggregator, tracker, decode)

    def batch(items: list[Any]) -> Any:
        return decode(items)

    return batch
