"""Custom merge ops (``Merge(configs, op=...)``) and the end-of-stream
markers they see.

The engine merges the inputs natively (in arrival order). Each input ends
with a stage that tags its items with the input's index and, when the input
ends (or ends an epoch), sends an EOF marker tagged the same way. A stateful
stage after the merge hands every item to the user's ``async op(info,
input_queues, output_queue)``, which runs on the pipeline's event loop, and
emits what the op has put in ``output_queue`` so far; at the end of the
stream (and at each epoch end) it waits for the op to return and emits the
rest.

An op that returns early ends the merge's epoch: the Python sources of its
inputs stop at their next item (an ``EarlyStop`` they share with the op
stage), so that even endless inputs end, and items still on their way are
dropped.
"""

from __future__ import annotations

import asyncio
import itertools

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
    """True for SPDL's epoch-end marker. feedline's engine carries epoch ends
    out of band (each epoch of a continuous source ends a ``for`` loop, and a
    custom merge op sees EOF at each epoch end), so user code never receives
    the marker; the test exists for code written for SPDL."""
    return item is EPOCH_END


class EarlyStop:
    """Set by a custom merge op's stage when the op returns before its
    inputs end; read by the sources of those inputs."""

    def __init__(self):
        self.stopped_epoch = -1  # the epoch whose sources should stop


class StoppableSource:
    """A source (iterable) that ends its pass early once any of
    ``stoppers`` stopped the epoch of that pass. Pass k is epoch k."""

    def __init__(self, source, stoppers):
        self._source = source
        self._stoppers = stoppers
        self._passes = itertools.count()

    def _stopped(self, epoch: int) -> bool:
        return any(s.stopped_epoch == epoch for s in self._stoppers)

    def __iter__(self):
        epoch = next(self._passes)
        it = iter(self._source)
        while not self._stopped(epoch):
            try:
                item = next(it)
            except StopIteration:
                return
            yield item


class Tagged:
    """An item on its way into a custom merge, with the index of its input."""

    __slots__ = ("index", "value")

    def __init__(self, index: int, value):
        self.index = index
        self.value = value


class InputEnd:
    """The last stage of input ``index`` (an Aggregator): tags each item,
    and at the input's end (each epoch end and the end of the stream) emits
    a tagged EOF."""

    def __init__(self, index: int):
        self._index = index

    def accumulate(self, item):
        return Tagged(self._index, item)

    def flush(self):
        return Tagged(self._index, EOF)


class CustomMergeAggregator:
    """The stateful stage that runs a custom merge op (an Aggregator: it
    gets the tagged items one by one and returns lists of outputs; a
    disaggregate stage after it splits them)."""

    def __init__(self, op, info, num_inputs: int, loop_thread, stopper: EarlyStop):
        self._op = op
        self._info = info
        self._n = num_inputs
        self._loop_thread = loop_thread
        self._stopper = stopper
        self._epoch = 0
        self._task: asyncio.Task | None = None
        self._inputs: list[asyncio.Queue] = []
        self._ended: list[bool] = []
        self._output: asyncio.Queue | None = None

    async def _start(self):
        self._inputs = [asyncio.Queue() for _ in range(self._n)]
        self._ended = [False] * self._n
        self._output = asyncio.Queue()
        self._task = asyncio.get_running_loop().create_task(self._op(self._info, list(self._inputs), self._output))
        epoch = self._epoch

        def stop_inputs(task):
            # The op is done with this epoch: if it returned before its
            # inputs ended, their sources stop now (at the epoch's end this
            # changes nothing: its passes are over).
            self._stopper.stopped_epoch = epoch

        self._task.add_done_callback(stop_inputs)

    async def _push(self, index, value):
        if self._task is None:
            await self._start()
        assert self._task is not None
        if value is EOF:
            self._ended[index] = True
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
        for q, ended in zip(self._inputs, self._ended):
            if not ended:
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
        try:
            out = self._loop_thread.run(self._finish())
        finally:
            self._epoch += 1  # also for an epoch without items
        return None if out is _END else (out or None)
