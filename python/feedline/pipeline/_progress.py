"""Which items of a pass are done: the state a DataLoader or a resumable
Pipeline checkpoints."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any


class Progress:
    """The done positions of one epoch: every position below ``low``, plus
    the few in ``above`` (delivered or failed out of order).

    ``above`` holds only positions done while an earlier one was still in
    flight, so its size is bounded by the items in flight, not by the
    dataset. Not thread-safe; :class:`Tracker` locks around it.
    """

    __slots__ = ("low", "above")

    def __init__(self, low: int = 0, above: Iterable[int] = ()) -> None:
        self.low = low
        self.above = set(above)

    def mark(self, position: int) -> None:
        if position < self.low:
            return
        self.above.add(position)
        while self.low in self.above:
            self.above.discard(self.low)
            self.low += 1

    def mark_through(self, position: int) -> None:
        """Every position up to ``position`` is done (in input order a
        delivered item means every earlier one was delivered, failed or
        dropped)."""
        if position < self.low:
            return
        self.low = position + 1
        self.above = {p for p in self.above if p > position}
        while self.low in self.above:
            self.above.discard(self.low)
            self.low += 1

    def add_count(self, count: int) -> None:
        """Counted mode: ``count`` more items done, in order."""
        self.low += count

    def __contains__(self, position: int) -> bool:
        return position < self.low or position in self.above

    def copy(self) -> Progress:
        return Progress(self.low, self.above)

    def ranges(self) -> list[int]:
        """``above`` as flat ``[start, stop, start, stop, ...]`` runs."""
        out: list[int] = []
        for p in sorted(self.above):
            if out and out[-1] == p:
                out[-1] = p + 1
            else:
                out += [p, p + 1]
        return out

    @classmethod
    def from_ranges(cls, low: int, ranges: list[int]) -> Progress:
        if len(ranges) % 2:
            raise ValueError(f"done must hold [start, stop] pairs, got {len(ranges)} numbers")
        above: set[int] = set()
        for start, stop in zip(ranges[::2], ranges[1::2]):
            if not (low < start < stop):
                raise ValueError(f"done: each run must satisfy position < start < stop, got [{start}, {stop}]")
            above.update(range(start, stop))
        return cls(low, above)


class Tracker:
    """Progress per epoch, shared by the consumer and the worker threads
    (which mark failed and skipped items)."""

    def __init__(self) -> None:
        # Reentrant: a released DroppedTag (see _carry.py) marks from __del__,
        # which may run on any thread that holds the GIL, this one included.
        self._lock = threading.RLock()
        self._epochs: dict[int, Progress] = {}
        self._floor = 0  # marks of earlier epochs (late ones) are ignored

    def mark(self, epoch: int, positions: Iterable[int]) -> None:
        with self._lock:
            if epoch < self._floor:
                return
            progress = self._epochs.setdefault(epoch, Progress())
            for p in positions:
                progress.mark(p)

    def mark_through(self, epoch: int, position: int) -> None:
        with self._lock:
            if epoch >= self._floor:
                self._epochs.setdefault(epoch, Progress()).mark_through(position)

    def add_count(self, epoch: int, count: int) -> None:
        with self._lock:
            self._epochs.setdefault(epoch, Progress()).add_count(count)

    def get(self, epoch: int) -> Progress:
        """A copy of ``epoch``'s progress."""
        with self._lock:
            progress = self._epochs.get(epoch)
            return Progress() if progress is None else progress.copy()

    def set(self, epoch: int, progress: Progress) -> None:
        with self._lock:
            self._epochs = {epoch: progress.copy()}
            self._floor = epoch

    def finish(self, epoch: int) -> None:
        """Forgets ``epoch`` and every earlier one."""
        with self._lock:
            self._epochs = {e: p for e, p in self._epochs.items() if e > epoch}
            self._floor = max(self._floor, epoch + 1)

    def state(self, epoch: int) -> dict[str, Any]:
        with self._lock:
            progress = self._epochs.get(epoch) or Progress()
            return {"epoch": epoch, "position": progress.low, "done": progress.ranges()}

    @staticmethod
    def parse(state: Mapping[str, Any]) -> tuple[int, Progress]:
        from ..source._checks import check_int

        epoch = check_int("epoch", state["epoch"], minimum=0)
        low = check_int("position", state["position"], minimum=0)
        done = state.get("done", [])
        if not isinstance(done, (list, tuple)):
            raise ValueError(f"done must be a list of ints, got {type(done).__name__}")
        return epoch, Progress.from_ranges(low, [check_int("done", d, minimum=0) for d in done])
