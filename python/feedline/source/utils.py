"""Iterator utilities: ``MergeIterator``, ``repeat_source``, ``embed_shuffle``
(the names of ``spdl.source.utils``) and :func:`item_rng`.

Each keeps a small ``state_dict()`` (counters and seeds, never the data) and
resumes from it with ``load_state_dict()``.
"""

from __future__ import annotations

import logging
import math
import random
import time
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar

import numpy as np

from ._checks import check_int, check_state

__all__ = ["MergeIterator", "embed_shuffle", "item_rng", "repeat_source"]

T = TypeVar("T")
_LG = logging.getLogger(__name__)

# A shuffle slower than this is worth a warning: it runs before every epoch.
_SLOW_SHUFFLE_S = 3.0


def item_rng(seed: int, epoch: int, index: int) -> np.random.Generator:
    """A NumPy Generator determined by ``(seed, epoch, index)`` alone.

    Per-item randomness (augmentations) drawn from it is the same whatever
    the thread count or the order items are processed in, and the same
    after a resume. Inside a :class:`feedline.dataloader.DataLoader`
    preprocessor, :func:`feedline.dataloader.item_rng` gives the one of the
    item being processed.
    """
    key = [
        check_int("seed", seed, minimum=0),
        check_int("epoch", epoch, minimum=0),
        check_int("index", index, minimum=0),
    ]
    return np.random.default_rng(key)


def _shuffle_timed(src: Any, seed: int) -> None:
    t0 = time.monotonic()
    src.shuffle(seed=seed)
    elapsed = time.monotonic() - t0
    if elapsed > _SLOW_SHUFFLE_S:
        warnings.warn(
            f"shuffling {type(src).__name__} took {elapsed:.1f} s; it runs once per epoch", RuntimeWarning, stacklevel=3
        )


class _EmbedShuffle(Generic[T]):
    """See :func:`embed_shuffle`."""

    def __init__(self, src: Any, shuffle_last: bool, epoch: int) -> None:
        if not callable(getattr(src, "shuffle", None)):
            raise ValueError(f"src must have a shuffle(seed) method, got {type(src).__name__}")
        self._src = src
        self._shuffle_last = bool(shuffle_last)
        self._epoch = check_int("epoch", epoch, minimum=0)  # the next pass's epoch
        self._current = self._epoch  # the epoch of the pass in progress (or last)
        self._shuffled_with: int | None = None  # the seed of the last shuffle

    def __len__(self) -> int:
        return len(self._src)

    def set_epoch(self, epoch: int) -> None:
        """The next pass is epoch ``epoch``: shuffled with seed ``epoch``
        before it, or with ``shuffle_last``, in the order the end of epoch
        ``epoch - 1`` shuffled to (the source's own order for epoch 0)."""
        self._epoch = check_int("epoch", epoch, minimum=0)
        if self._shuffle_last and epoch > 0 and self._shuffled_with != epoch - 1:
            _shuffle_timed(self._src, epoch - 1)
            self._shuffled_with = epoch - 1

    def __iter__(self) -> Iterator[T]:
        # Not a generator: the pass begins here, so that a state_dict()
        # taken right after iter() (as a resumable pipeline records the
        # start of each pass) describes this pass, not the last one.
        self._current = self._epoch
        if not self._shuffle_last:
            # A resumed pass shuffles with the seed it was saved with, which
            # keeps the source's loaded position (see the samplers).
            self._shuffle(self._epoch)
            self._epoch += 1
        return self._items(iter(self._src))

    def _items(self, it: Iterator[T]) -> Iterator[T]:
        try:
            yield from it
        finally:
            if self._shuffle_last:
                self._shuffle(self._epoch)
                self._epoch += 1

    def _shuffle(self, seed: int) -> None:
        _shuffle_timed(self._src, seed)
        self._shuffled_with = seed

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"epoch": self._current if not self._shuffle_last else self._epoch}
        if callable(getattr(self._src, "state_dict", None)):
            state["src"] = self._src.state_dict()
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        state = check_state(state, "embed_shuffle", ("epoch",))
        self._epoch = self._current = check_int("epoch", state["epoch"], minimum=0)
        if "src" in state:
            self._src.load_state_dict(state["src"])

    def __repr__(self) -> str:
        return f"embed_shuffle({self._src!r}, shuffle_last={self._shuffle_last}, epoch={self._epoch})"


def embed_shuffle(src: Any, /, *, shuffle_last: bool = False, epoch: int = 0) -> Any:
    """An iterable over ``src`` that calls ``src.shuffle(seed=epoch)`` before
    each pass (or, with ``shuffle_last``, after it, also when the pass is
    left early), then counts ``epoch`` up.

    ``src`` must have a ``shuffle(seed)`` method (``IterableWithShuffle``).
    The result has ``len()`` when ``src`` has, pickles, and has
    ``set_epoch()`` (so a :class:`~feedline.dataloader.DataLoader` numbers its
    passes) and ``state_dict()``/``load_state_dict()``, which include
    ``src``'s own state when it has one. A warning says when a shuffle takes
    longer than 3 s.
    """
    return _EmbedShuffle(src, shuffle_last, epoch)


class _RepeatSource(Generic[T]):
    """See :func:`repeat_source`."""

    def __init__(self, src: Iterable[T], epoch: int) -> None:
        self._src = src
        self._epoch = check_int("epoch", epoch, minimum=0)
        self._shuffles = callable(getattr(src, "shuffle", None))
        self._position = 0  # items of the current epoch handed out
        self._skip = 0
        self._it: Iterator[T] | None = None

    def __iter__(self) -> _RepeatSource[T]:
        return self

    def __next__(self) -> T:
        if self._it is None:
            self._it = self._run()
        return next(self._it)

    def _run(self) -> Iterator[T]:
        while True:
            if self._shuffles:
                _shuffle_timed(self._src, self._epoch)
            elif callable(set_epoch := getattr(self._src, "set_epoch", None)):
                # embed_shuffle(...) and the like: the pass is a function of
                # the epoch, so a restored repeat_source replays the same one.
                set_epoch(self._epoch)
            _LG.info("epoch %d starts", self._epoch)
            t0, count = time.monotonic(), 0
            it = iter(self._src)
            skip, self._skip = self._skip, 0
            for _ in range(skip):
                if next(it, _END) is _END:
                    break
            self._position = skip
            for item in it:
                self._position += 1
                count += 1
                yield item
            elapsed = time.monotonic() - t0
            _LG.info(
                "epoch %d done: %d items in %.1f s (%.1f items/s)",
                self._epoch,
                count,
                elapsed,
                count / elapsed if elapsed > 0 else 0.0,
            )
            if count == 0 and skip == 0:
                raise ValueError(f"repeat_source: src ({type(self._src).__name__}) yielded no items in a pass")
            self._epoch += 1

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self._epoch, "position": self._position}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if self._it is not None:
            raise RuntimeError("repeat_source: load_state_dict must come before iteration starts")
        state = check_state(state, "repeat_source", ("epoch", "position"))
        self._epoch = check_int("epoch", state["epoch"], minimum=0)
        self._skip = self._position = check_int("position", state["position"], minimum=0)

    def __getstate__(self) -> dict[str, Any]:
        if self._it is not None:
            raise TypeError("repeat_source can be pickled only before iteration starts")
        return self.__dict__.copy()


_END = object()


def repeat_source(src: Iterable[T], /, epoch: int = 0) -> Iterator[T]:
    """Iterates ``src`` again and again, forever.

    If ``src`` has ``shuffle(seed)``, it is called with the epoch number
    before each pass (as :func:`embed_shuffle`); otherwise, if it has
    ``set_epoch(epoch)`` (an ``embed_shuffle``), that is. Each epoch's start and end
    (items, seconds, items/s) are logged at INFO on ``feedline.source.utils``.
    Picklable before iteration starts; ``state_dict()`` is ``(epoch,
    position)``, and after ``load_state_dict()`` iteration resumes there (the
    first ``position`` items of the epoch are skipped, not delivered).
    A pass that yields nothing raises ValueError rather than spin.
    """
    return _RepeatSource(src, epoch)


class MergeIterator(Generic[T]):
    """Items from several iterables, in turns or at random by weight.

    Args:
        iterables: the iterables to merge (at least one).
        weights: None: round-robin, one item from each in turn. Otherwise one
            non-negative weight per iterable: each item comes from an
            iterable picked at random in proportion to its weight
            (``random.Random(seed)``); zero-weight iterables are left out.
        stop_after: 0 (default): go on until every iterable is exhausted
            (exhausted ones drop out); ``n > 0``: stop after ``n`` items (or
            earlier if all are exhausted); -1: stop when the first iterable is
            exhausted.
        seed: the seed of the random picks.

    Each ``iter()`` is a new pass over fresh iterators of ``iterables``.
    Resumable: ``state_dict()`` is the number of items the current pass has
    handed out, with the state each iterable that has ``state_dict()`` had
    when the pass began; after ``load_state_dict()`` those iterables are
    restored and the next pass replays that many picks without handing
    their items out. ``set_epoch(epoch)`` is passed on to the iterables
    that have it (a DataLoader calls it before each pass).
    """

    def __init__(
        self,
        iterables: Sequence[Iterable[T]],
        *,
        weights: Sequence[float] | None = None,
        stop_after: int = 0,
        seed: int = 0,
    ) -> None:
        self._iterables = list(iterables)
        if not self._iterables:
            raise ValueError("iterables must not be empty")
        self._stop_after = check_int("stop_after", stop_after, minimum=-1)
        self._seed = check_int("seed", seed, minimum=0)
        self._weights: list[float] | None = None
        if weights is not None:
            ws = [float(w) for w in weights]
            if len(ws) != len(self._iterables):
                raise ValueError(f"weights must have {len(self._iterables)} entries (one per iterable), got {len(ws)}")
            for i, w in enumerate(ws):
                if not (w >= 0) or w == float("inf"):
                    raise ValueError(f"weights must be finite and >= 0, got {w} at index {i}")
            if not any(ws):
                raise ValueError("weights must not all be zero")
            if not math.isfinite(sum(ws)):  # finite weights whose sum is not
                top = max(ws)
                ws = [w / top for w in ws]
            self._weights = ws
        self._emitted = 0
        self._skip = 0
        # Each iterable's state when the current pass began (None: it has
        # no state_dict(), or no pass began yet), and the states to restore
        # before the next pass.
        self._starts: list[Any] | None = None
        self._restore: list[Any] | None = None

    def set_epoch(self, epoch: int) -> None:
        """Calls ``set_epoch(epoch)`` of each iterable that has one."""
        check_int("epoch", epoch, minimum=0)
        for it in self._iterables:
            if callable(set_epoch := getattr(it, "set_epoch", None)):
                set_epoch(epoch)

    def __iter__(self) -> Iterator[T]:
        # Not a generator: the pass begins here, so that a state_dict()
        # taken right after iter() (as a resumable pipeline records the
        # start of each pass) describes this pass, not the last one.
        skip, self._skip = self._skip, 0
        restore, self._restore = self._restore, None
        if restore is not None:
            for it, state in zip(self._iterables, restore):
                if state is not None:
                    it.load_state_dict(state)  # type: ignore[attr-defined]  # checked by load_state_dict()
        self._emitted = skip
        used = [i for i in range(len(self._iterables)) if self._weights is None or self._weights[i] > 0]
        live = [(i, iter(self._iterables[i])) for i in used]  # each pass begins now
        self._starts = self._child_states()
        return self._items(skip, live)

    def _child_states(self) -> list[Any]:
        states = []
        for it in self._iterables:
            state_dict = getattr(it, "state_dict", None)
            states.append(state_dict() if callable(state_dict) else None)
        return states

    def _items(self, skip: int, live: list[tuple[int, Iterator[T]]]) -> Iterator[T]:
        for n, item in enumerate(self._picks(live)):
            if n < skip:
                continue
            self._emitted = n + 1
            yield item

    def _picks(self, live: list[tuple[int, Iterator[T]]]) -> Iterator[T]:
        limit = self._stop_after if self._stop_after > 0 else None
        weights = None if self._weights is None else [self._weights[i] for i, _ in live]
        rng = random.Random(self._seed)
        count = 0
        turn = 0
        while live:
            if weights is None:
                slot = turn % len(live)
            else:
                slot = rng.choices(range(len(live)), weights=weights)[0]
            item = next(live[slot][1], _END)
            if item is _END:
                if self._stop_after == -1:
                    return
                del live[slot]
                if weights is not None:
                    del weights[slot]
                turn = slot  # round-robin: the next iterable now sits at `slot`
                continue
            turn = slot + 1
            yield item  # type: ignore[misc]
            count += 1
            if limit is not None and count >= limit:
                return

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"seed": self._seed, "position": self._emitted}
        starts = self._starts if self._starts is not None else self._child_states()
        if any(s is not None for s in starts):
            state["iterables"] = starts
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        state = check_state(state, "MergeIterator", ("position",))
        seed = check_int("seed", state.get("seed", self._seed), minimum=0)
        position = check_int("position", state["position"], minimum=0)
        restore = state.get("iterables")
        if restore is not None:
            if not isinstance(restore, (list, tuple)) or len(restore) != len(self._iterables):
                raise ValueError(
                    f"MergeIterator state: iterables must hold {len(self._iterables)} states (one per iterable)"
                )
            for i, (it, child) in enumerate(zip(self._iterables, restore)):
                if child is not None and not callable(getattr(it, "load_state_dict", None)):
                    raise ValueError(f"MergeIterator state: iterable {i} ({type(it).__name__}) has no load_state_dict")
            restore = list(restore)
        self._seed, self._skip, self._emitted, self._restore = seed, position, position, restore
        self._starts = restore
