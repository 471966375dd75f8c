"""An item's (epoch, position) carried through native ops as one more field
of its sample, so that a DataLoader (or a resumable Pipeline) with native ops resumes
exactly.

The user's native ops take samples (docs/ops.md "Samples"): they work on
one field, the payload, and carry the others along without the GIL. A
DataLoader whose native ops all work on the same field ``f`` wraps each
source item so that the payload stays at ``f`` and a :class:`Tag` rides
along:

- a dict gets one more key, ``TAG_KEY``;
- a tuple gets the tag appended (prepended when ``f`` is a negative index,
  so that ``f`` still points at the payload);
- any other value becomes a sample with the value at ``f`` (a tuple padded
  with None, or a dict ``{f: value, TAG_KEY: tag}`` for a key).

A batch op gives the tags back as one more column, in row order, without
the rows it left out. The loader strips the tag before the consumer sees
an item, so the user's items come back in their own shape.
"""

from __future__ import annotations

from typing import Any

from ._progress import Tracker

#: The key of the tag in a dict sample.
TAG_KEY = "__feedline_position__"

# How the user's item was wrapped (Tag.kind).
_BARE, _TUPLE, _DICT = 0, 1, 2


class Run:
    """One pipeline's link to the tracker: tags of a stopped pipeline (or of
    a loader restored to another state) no longer mark anything."""

    __slots__ = ("tracker", "active")

    def __init__(self, tracker: Tracker, active: bool = True) -> None:
        self.tracker = tracker
        self.active = active


_OFF = Run(Tracker(), active=False)


class Tag:
    """An item's epoch and position in it."""

    __slots__ = ("epoch", "position", "kind")

    def __init__(self, epoch: int, position: int) -> None:
        self.epoch = epoch
        self.position = position
        self.kind = _BARE

    def __repr__(self) -> str:
        return f"<item {self.position} of epoch {self.epoch}>"


class DroppedTag(Tag):
    """A tag that marks its item done when it is released while its pipeline
    runs: a native op that fails on an item, or a batch op that leaves a row
    out, drops the sample and with it the tag (the engine releases Python
    references from native threads on the next thread that holds the GIL).
    A delivered item is already marked; marking it again does nothing."""

    __slots__ = ("run",)

    def __init__(self, epoch: int, position: int, run: Run) -> None:
        super().__init__(epoch, position)
        self.run = run

    def __del__(self) -> None:
        run = self.run
        if run.active:
            run.tracker.mark(self.epoch, (self.position,))


def _disarm(tag: Tag) -> Tag:
    """``tag`` no longer marks its item when released: it leaves the native
    ops for a Python stage, which marks (or delivers) it itself."""
    if isinstance(tag, DroppedTag):
        tag.run = _OFF
    return tag


class Samples:
    """Wraps items with their tags for native ops on ``field``, and unwraps
    per-item results and batch columns."""

    def __init__(self, field: int | str) -> None:
        self.field = field
        # A negative index counts from the end: the tag goes in front.
        self.front = isinstance(field, int) and field < 0

    def split(self, carrier: Any) -> tuple[Tag, Any]:
        """A sample -> (its tag, left armed: the value goes on through
        native ops; the user's value)."""
        tag: Tag = self._tags(carrier)
        return tag, self._strip(carrier, tag.kind)

    def wrap(self, value: Any, tag: Tag) -> Any:
        if isinstance(value, dict):
            tag.kind = _DICT
            out = dict(value)
            out[TAG_KEY] = tag
            return out
        if isinstance(value, tuple):
            tag.kind = _TUPLE
            return (tag, *value) if self.front else (*value, tag)
        tag.kind = _BARE
        field = self.field
        if isinstance(field, str):
            return {field: value, TAG_KEY: tag}
        if field >= 0:
            padded: list[Any] = [None] * (field + 2)
            padded[field] = value
            padded[-1] = tag
        else:
            padded = [None] * (1 - field)
            padded[field] = value
            padded[0] = tag
        return tuple(padded)

    def _strip(self, carrier: Any, kind: int) -> Any:
        if kind == _BARE:
            return carrier[self.field]
        if kind == _DICT:
            out = dict(carrier)
            del out[TAG_KEY]
            return out
        return carrier[1:] if self.front else carrier[:-1]

    def _tags(self, carrier: Any) -> Any:
        if isinstance(carrier, dict):
            return carrier[TAG_KEY]
        return carrier[0] if self.front else carrier[-1]

    def unwrap(self, carrier: Any) -> tuple[int, tuple[int, ...], Any]:
        """A sample (or a result of a per-item op on it) -> (epoch,
        (position,), the user's value). The tag is disarmed (see
        :func:`_disarm`); so are those of the other unwrap methods."""
        tag: Tag = _disarm(self._tags(carrier))
        return tag.epoch, (tag.position,), self._strip(carrier, tag.kind)

    def unwrap_rows(self, carriers: list[Any]) -> tuple[int, tuple[int, ...], list[Any]]:
        """A batch of samples (``aggregate`` output) -> (epoch, positions,
        the user's values)."""
        rows = [self.unwrap(c) for c in carriers]
        return rows[0][0], tuple(p for _, ps, _ in rows for p in ps), [v for _, _, v in rows]

    def unwrap_columns(self, carrier: Any) -> tuple[int, tuple[int, ...], Any]:
        """A batch op's result (the tags a column) -> (epoch, positions of
        the rows kept, the batch in the user's shape)."""
        tags: list[Tag] = [_disarm(t) for t in self._tags(carrier)]
        first = tags[0]
        return first.epoch, tuple(t.position for t in tags), self._strip(carrier, first.kind)
