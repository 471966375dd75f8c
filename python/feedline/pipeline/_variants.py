"""PathVariants, composed from the engine's linear stages.

A path-variants stage becomes a chain of ordinary engine stages: a router
stage, the stages of every path one after the other, and a merge stage.
The router wraps each item in a small carrier naming its path; the stages of
path ``i`` work on the items that carry ``i`` and pass every other item on
unchanged (a pass-through is a Python call of about a microsecond); the merge
unwraps. Nesting adds one carrier level per PathVariants. In batched mode
the router splits a batch into one list per path, carried together in one
item, so that each path stage works on its own list and the merge
concatenates them in path order: the lists of one batch can never be
separated or reordered.

A *scope* says which items a stage works on: a tuple of steps from the
outside in, ``("r", i)`` for "the item carries path i of a per-item
PathVariants" and ``("p", j)`` for "list j of a batched one's carrier".
"""

from __future__ import annotations

import inspect
import operator
from typing import Any

from .defs import Aggregator, _call_target

__all__ = ["Routed", "Parts", "Scope"]

Scope = tuple  # of ("r" | "p", int) steps


class Routed:
    """An item on path ``path`` of a per-item PathVariants."""

    __slots__ = ("path", "value")

    def __init__(self, path: int, value):
        self.path = path
        self.value = value


class Parts:
    """A batch split by a batched PathVariants: one list per path."""

    __slots__ = ("parts",)

    def __init__(self, parts: list):
        self.parts = parts


_FOREIGN = object()


def focus(item, scope: Scope):
    """Returns (value, holder): the value the stage of ``scope`` works on and
    the carrier holding it (None at the top level), or (_FOREIGN, None) when
    the item belongs to another path."""
    holder: Any = None
    value = item
    for kind, k in scope:
        if kind == "r":
            if type(value) is not Routed or value.path != k:
                return _FOREIGN, None
            holder, value = value, value.value
        else:
            if type(value) is not Parts:
                return _FOREIGN, None
            holder, value = (value, k), value.parts[k]
    return value, holder


def put_back(item, holder, scope: Scope, result):
    """``item`` with the focused value replaced by ``result``. A result of
    None drops a per-item path's item; a batched path's list becomes empty."""
    if holder is None:
        return result
    if type(holder) is Routed:
        if result is None:
            return None
        holder.value = result
    else:
        parts, k = holder
        parts.parts[k] = [] if result is None else result
    return item


def wrap(scope: Scope, value):
    """A fresh item at ``scope`` (per-item paths only) holding ``value``."""
    for _kind, k in reversed(scope):
        value = Routed(k, value)
    return value


def in_batched_path(scope: Scope) -> bool:
    return any(kind == "p" for kind, _ in scope)


def _named(fn, like):
    name = getattr(_call_target(like), "__name__", None) or type(like).__name__
    fn.__name__ = fn.__qualname__ = name
    return fn


def scoped_map(op, scope: Scope):
    """A map op that applies ``op`` to the items of ``scope`` only."""

    def call(item):
        value, holder = focus(item, scope)
        if value is _FOREIGN:
            return item
        return put_back(item, holder, scope, op(value))

    return _named(call, op)


class _PutBack:
    """The completion of a call on a focused value: puts the result back
    into the item before handing it to the engine's completion."""

    __slots__ = ("_completion", "_holder", "_item", "_scope")

    def __init__(self, completion, item, holder, scope):
        self._completion = completion
        self._item = item
        self._holder = holder
        self._scope = scope

    @property
    def pending(self):
        return self._completion.pending

    def emit(self, result):
        self._completion.emit(put_back(self._item, self._holder, self._scope, result))

    def fail(self, error):
        self._completion.fail(error)


def scoped_submit(submit, scope: Scope):
    """An async op's submit function (coroutine or executor) for the items of
    ``scope``: other items are passed on at once, without a call."""

    def call(item, completion):
        value, holder = focus(item, scope)
        if value is _FOREIGN:
            completion.emit(item)
        else:
            submit(value, _PutBack(completion, item, holder, scope))

    return call


def scoped_generator(gen_fn, scope: Scope):
    """A generator op for the items of a per-item path's scope."""

    def gen(item):
        value, _ = focus(item, scope)
        if value is _FOREIGN:
            yield item
            return
        for r in gen_fn(value):
            yield None if r is None else wrap(scope, r)

    return _named(gen, gen_fn)


def scoped_disaggregate(scope: Scope):
    def disaggregate(item):
        value, _ = focus(item, scope)
        if value is _FOREIGN:
            yield item
            return
        for r in value:
            yield wrap(scope, r)

    return disaggregate


class ScopedAggregator(Aggregator):
    """Batches the items of a per-item path's scope; passes others on."""

    def __init__(self, agg: Aggregator, scope: Scope):
        self._agg = agg
        self._scope = scope

    def accumulate(self, item):
        value, _ = focus(item, self._scope)
        if value is _FOREIGN:
            return item
        r = self._agg.accumulate(value)
        return None if r is None else wrap(self._scope, r)

    def flush(self):
        r = self._agg.flush()
        return None if r is None else wrap(self._scope, r)

    def __repr__(self):
        return repr(self._agg)


def _check_index(index, n: int, name: str) -> int:
    if isinstance(index, bool) or not hasattr(index, "__index__"):
        raise TypeError(f"the router of {name} must return an int, got {type(index).__name__}")
    index = operator.index(index)  # also NumPy integers
    if not 0 <= index < n:
        raise IndexError(f"the router of {name} returned {index}; there are {n} paths")
    return index


def _split(batch, indices, n: int, name: str) -> Parts:
    items = list(batch)
    indices = list(indices)
    if len(indices) != len(items):
        raise ValueError(
            f"the batched router of {name} returned {len(indices)} indices for a batch of {len(items)} items"
        )
    parts: list[list] = [[] for _ in range(n)]
    for item, index in zip(items, indices):
        parts[_check_index(index, n, name)].append(item)
    return Parts(parts)


def router_op(router, n: int, name: str, batched: bool):
    """The router stage's op, on the value the stage works on: it returns
    the value's carrier. ``async def`` when the router is."""
    if inspect.iscoroutinefunction(_call_target(router)):

        async def aroute(value):
            if batched:
                return _split(value, await router(value), n, name)
            return Routed(_check_index(await router(value), n, name), value)

        return _named(aroute, router)

    def route(value):
        if batched:
            return _split(value, router(value), n, name)
        return Routed(_check_index(router(value), n, name), value)

    return _named(route, router)


def merge_op(batched: bool, scope: Scope):
    """The merge stage's op: unwraps a per-item carrier, or concatenates a
    batched one's lists in path order (an empty result is dropped)."""

    def merge(item):
        value, holder = focus(item, scope)
        if value is _FOREIGN:
            return item
        if batched:
            out: list = []
            for part in value.parts:
                out.extend(part)
            return put_back(item, holder, scope, out or None)
        return put_back(item, holder, scope, value.value)

    return merge
