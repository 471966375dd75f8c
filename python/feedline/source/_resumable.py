"""The position bookkeeping every resumable source shares."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar

from ._checks import check_int, check_matches, check_state

T = TypeVar("T")


class Passes(Generic[T]):
    """Counts the items of the current pass and holds a resume position.

    A source iterates ``order()`` once per ``__iter__`` (one pass). The items
    handed out by the latest pass are counted (``position``): the count goes
    up *before* an item is yielded, so a ``state_dict()`` taken after the
    consumer received an item counts it. ``resume_at(k)`` makes the next pass
    skip its first ``k`` items, once. Not thread-safe: a source is iterated by
    one thread at a time.
    """

    def __init__(self) -> None:
        self.position = 0
        self.pending = 0

    def resume_at(self, position: int) -> None:
        self.pending = position
        self.position = position

    def restore(self, position: int, length: int) -> None:
        """``resume_at`` for a saved position of a pass of ``length`` items:
        a position at the end is a finished pass (saved after its last item,
        or between passes), so the next pass starts at the beginning rather
        than being empty, as a restored DataLoader does."""
        self.resume_at(0 if position >= length else position)

    def run(self, order: Sequence[T]) -> Iterator[T]:
        """Begins a pass at once (so that a ``state_dict()`` taken right after
        ``iter(source)`` describes the start of this pass, as a resumable
        pipeline records it) and returns its items."""
        start, self.pending = self.pending, 0
        self.position = start
        return self._items(order, start)

    def _items(self, order: Sequence[T], start: int) -> Iterator[T]:
        for i in range(start, len(order)):
            self.position = i + 1
            yield order[i]


class SeededList(Generic[T]):
    """A fixed list served one pass per ``__iter__``, in sorted order or in a
    permutation of it drawn from ``shuffle(seed)`` alone, with
    ``state_dict()``/``load_state_dict()`` (seed and position): what
    ``LocalDirectory`` and ``ImageNet`` share. A subclass calls
    ``_set_items`` once and names itself and its items in ``_NAME`` and
    ``_NOUN``."""

    _NAME = "SeededList"
    _NOUN = "items"

    def _set_items(self, items: list[T]) -> None:
        self._sorted = items
        self._order = items
        self._seed: int | None = None
        self._passes: Passes[T] = Passes()

    def __len__(self) -> int:
        return len(self._sorted)

    def __iter__(self) -> Iterator[T]:
        return self._passes.run(self._order)

    def shuffle(self, seed: int) -> None:
        """Orders the items by a permutation of the sorted list drawn from ``seed``."""
        seed = check_int("seed", seed, minimum=0)
        if seed != self._seed:
            self._passes.resume_at(0)
        self._apply(seed)

    def _apply(self, seed: int | None) -> None:
        self._seed = seed
        if seed is None:
            self._order = self._sorted
        else:
            order = list(self._sorted)
            random.Random(seed).shuffle(order)
            self._order = order

    def state_dict(self) -> dict[str, Any]:
        return {"n": len(self._sorted), "seed": self._seed, "position": self._passes.position}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        state = check_state(state, self._NAME, ("seed", "position"))
        check_matches(self._NAME, state, n=len(self._sorted))
        seed = state["seed"]
        self._apply(None if seed is None else check_int("seed", seed, minimum=0))
        position = check_int("position", state["position"], minimum=0)
        if position > len(self):
            raise ValueError(f"position must be <= {len(self)} (the number of {self._NOUN}), got {position}")
        self._passes.restore(position, len(self))
