"""Samples at the seam of native ops (docs/ops.md): the payload a native op
takes out of a tuple or dict, and the record given back with its field
replaced, or as the columns of a batch. The extension calls these; a record
itself is never changed.
"""

from __future__ import annotations

import copy
from typing import Any


def field(record: Any, key: Any) -> Any:
    """``record[key]``, the payload a native op works on."""
    try:
        return record[key]
    except (KeyError, IndexError, TypeError):
        raise ValueError(f"no field {key!r} in a sample of {len(record)} (give the op its field=)") from None


def _rebuilt(record: Any, items: list) -> Any:
    """A tuple of ``items`` of ``record``'s type: a namedtuple stays one."""
    make = getattr(type(record), "_make", None)
    return make(items) if make is not None else tuple(items)


def _dict_like(record: dict, items: dict) -> dict:
    """``items`` as a dict of ``record``'s type (a subclass, an
    OrderedDict, a defaultdict keep theirs)."""
    if type(record) is dict:
        return items
    out = copy.copy(record)
    out.clear()
    out.update(items)
    return out


def with_field(record: Any, key: Any, value: Any) -> Any:
    """``record`` with ``record[key]`` replaced by ``value``, of its type."""
    if isinstance(record, dict):
        out = dict(record)
        out[key] = value
        return _dict_like(record, out)
    items = list(record)
    items[key] = value
    return _rebuilt(record, items)


def columns(records: list, key: Any, batch: Any) -> Any:
    """The rows ``records`` of a batch as one record of their shape: each
    field the list of the rows' values, in row order, and ``key`` the batch
    (``[(p0, 3), (p1, 5)]`` -> ``(batch, [3, 5])``)."""
    first = records[0]
    is_dict = isinstance(first, dict)
    keys = list(first) if is_dict else range(len(first))
    # A row with a field the first lacks would lose it silently: refused,
    # as a row missing a field is.
    for r in records[1:]:
        extra = set(r) - set(first) if is_dict else range(len(first), len(r))
        if extra:
            raise ValueError(
                f"the samples of a batch differ in shape: field {sorted(extra, key=repr)[0]!r} is missing from some"
            )
    if not is_dict:
        key %= len(first)  # a negative index
    out: dict = {}
    for k in keys:
        if k == key:
            out[k] = batch
            continue
        try:
            out[k] = [r[k] for r in records]
        except (KeyError, IndexError):
            raise ValueError(f"the samples of a batch differ in shape: field {k!r} is missing from some") from None
    return _dict_like(first, out) if is_dict else _rebuilt(first, [out[i] for i in keys])
