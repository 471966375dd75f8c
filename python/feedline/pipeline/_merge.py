"""Custom merge ops (``Merge(configs, op=...)``) and the end-of-stream
markers they see.

The engine merges the inputs natively (in arrival order), each item tagged
with the index of its input; a stateful stage after it hands every item to
the user's ``async op(info, input_queues, output_queue)``, which runs on the
pipeline's event loop, and emits what the op has put in ``output_queue`` so
far. At the end of the stream (and at each epoch end) every input queue gets
an end marker, the stage waits for the op to return and emits the rest. An op
that returns early ends the merge: later items are dropped.
"""

from __future__ import annotations

import asyncio

from ._asyncio import _END

__all__ = ["is_eof", "is_epoch_end"]


class _Marker:
    __slots__ = ("_name",)

    def __init__(self, name: str):
        self._name = name

    def __repr__(self):
        return self._name


EOF = _Marker("EOF")
EPOCH_END = _Marker("EPOCH_END")


def is_eof(item) -> bool:
    """True for the marker that ends an input queue of a custom merge op."""
    return item is EOF


def is_epoch_end(item) -> bool:
    """True for an epoch-end marker. feedline's engine carries epoch ends out
    of band (each epoch of a continuous source ends a ``for`` loop), so user
    code meets this marker only where SPDL's documentation says it may."""
    return item is EPOCH_END


class Tagged:
    """An item on its way into a custom merge, with the index of its input."""

    __slots__ = ("index", "value")

    def __init__(self, index: int, value):
        self.index = index
        self.value = value


def tagger(index: int):
    def tag(item):
        return Tagged(index, item)

    tag.__name__ = tag.__qualname__ = f"merge_input{index}"
    return tag


class CustomMergeAggregator:
    """The stateful stage that runs a custom merge op (an Aggregator: it
    gets the tagged items one by one and returns lists of outputs; a
    disaggregate stage after it splits them)."""

    def __init__(self, op, info, num_inputs: int, loop_thread):
        self._op = op
        self._info = info
        self._n = num_inputs
        self._loop_thread = loop_thread
        self._task: asyncio.Task | None = None
        self._inputs: list[asyncio.Queue] = []
        self._output: asyncio.Queue | None = None

    async def _start(self):
        self._inputs = [asyncio.Queue() for _ in range(self._n)]
        self._output = asyncio.Queue()
        self._task = asyncio.get_running_loop().create_task(self._op(self._info, list(self._inputs), self._output))

    async def _push(self, index, value):
        if self._task is None:
            await self._start()
        assert self._task is not None
        if not self._task.done():
            self._inputs[index].put_nowait(value)
        await asyncio.sleep(0)  # lets the op take it
        return self._drain()

    def _drain(self):
        out = []
        assert self._output is not None
        while not self._output.empty():
            out.append(self._output.get_nowait())
        if self._task is not None and self._task.done() and not self._task.cancelled():
            exc = self._task.exception()
            if exc is not None:
                self._task = None  # raised once
                raise exc
        return out

    async def _finish(self):
        if self._task is None:
            return []
        for q in self._inputs:
            q.put_nowait(EOF)
        task = self._task
        try:
            await task
        finally:
            out = []
            assert self._output is not None
            while not self._output.empty():
                out.append(self._output.get_nowait())
            self._task = None
        return out

    def accumulate(self, item):
        out = self._loop_thread.run(self._push(item.index, item.value))
        return None if out is _END else (out or None)

    def flush(self):
        out = self._loop_thread.run(self._finish())
        return None if out is _END else (out or None)
