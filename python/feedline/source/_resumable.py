"""The position bookkeeping every resumable source shares."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Generic, TypeVar

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

    def run(self, order: Sequence[T]) -> Iterator[T]:
        start, self.pending = self.pending, 0
        self.position = start
        for i in range(start, len(order)):
            self.position = i + 1
            yield order[i]
