"""ProcessGroupStatsMonitor: the resources of the whole process group
(trainer, loader threads, worker processes), sampled by a process of its own.

SPDL's names and behaviour (``spdl.pipeline.ProcessGroupStatsMonitor``); the
sampling is native (``feedline::ProcessGroupMonitor``, reading ``/proc``
without the GIL), and malformed ``/proc`` files are logged once per kind.
See docs/stats.md#the-process-group.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import signal
from collections.abc import Awaitable, Callable

from .._feedline_ext import ProcessGroupResourceUsage, _ProcessGroupMonitor
from ._background import BackgroundTask

__all__ = ["ProcessGroupResourceUsage", "ProcessGroupStatsMonitor"]

_LG = logging.getLogger("feedline.pipeline")

# How often the parent checks that the monitor process is alive, and how
# long it waits for it to end after asking it to.
_POLL_INTERVAL = 5.0
_JOIN_TIMEOUT = 5.0

Callback = Callable[[ProcessGroupResourceUsage], Awaitable[None]]


async def _sample_loop(callback: Callback, interval: float, pgid: int) -> None:
    monitor = _ProcessGroupMonitor(pgid)
    loop = asyncio.get_running_loop()
    while True:
        usage = await loop.run_in_executor(None, monitor.sample)
        for problem in usage.problems:
            _LG.warning("ProcessGroupStatsMonitor: malformed %s", problem)
        try:
            await callback(usage)
        except Exception:
            _LG.exception("ProcessGroupStatsMonitor: the callback failed")
        await asyncio.sleep(interval)


def _monitor_main(callback: Callback, interval: float, pgid: int) -> None:
    """The monitor process: samples until SIGINT or SIGTERM."""
    loop = asyncio.new_event_loop()
    task = loop.create_task(_sample_loop(callback, interval, pgid))
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    try:
        loop.run_until_complete(task)
    except asyncio.CancelledError:
        pass
    finally:
        loop.close()


class ProcessGroupStatsMonitor(BackgroundTask):
    """Samples the CPU, memory, disk and network use of this process's group
    every ``interval`` seconds in a process of its own, and awaits
    ``callback(usage)`` there with a :class:`ProcessGroupResourceUsage`.

    Use it as a background task (``build(background_tasks=[lambda:
    ProcessGroupStatsMonitor(cb)])``) or await :meth:`run` yourself. The
    callback runs in the monitor process: it must pickle (a module-level
    ``async def``, or a ``functools.partial`` of one) under the ``spawn`` and
    ``forkserver`` start methods. The monitor process ends when the task is
    cancelled (terminated, then killed after 5 s) and on SIGINT/SIGTERM; the
    parent warns if it ends on its own. A daemon process cannot have
    children: there the monitor logs a warning and does nothing.
    """

    def __init__(self, callback: Callback, interval: float = 60.0, mp_context=None):
        if not interval > 0:
            raise ValueError(f"interval must be > 0 seconds, got {interval!r}")
        self._callback = callback
        self._interval = float(interval)
        self._context = mp_context if mp_context is not None else multiprocessing.get_context("spawn")

    async def run(self) -> None:
        if multiprocessing.current_process().daemon:
            _LG.warning("ProcessGroupStatsMonitor: a daemon process cannot start the monitor process; not monitoring")
            return
        process = self._context.Process(
            target=_monitor_main,
            args=(self._callback, self._interval, os.getpgrp()),
            name="feedline-pgroup-monitor",
            daemon=True,
        )
        process.start()
        try:
            while True:
                await asyncio.sleep(_POLL_INTERVAL)
                if not process.is_alive():
                    _LG.warning(
                        "ProcessGroupStatsMonitor: the monitor process ended on its own (exit code %s)",
                        process.exitcode,
                    )
                    return
        finally:
            await asyncio.get_running_loop().run_in_executor(None, _end, process)


def _end(process) -> None:
    if process.is_alive():
        process.terminate()
        process.join(_JOIN_TIMEOUT)
    if process.is_alive():
        process.kill()
        process.join()
    process.close()
