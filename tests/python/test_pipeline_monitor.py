# SPDX-License-Identifier: Apache-2.0
"""ProcessGroupStatsMonitor and ProcessGroupResourceUsage
(docs/stats.md#the-process-group): samples of the process group from /proc,
handed to an async callback in a monitor process of its own, which ends
with the task."""

from __future__ import annotations

import asyncio
import functools
import json
import multiprocessing
import os
import time

import pytest

from feedline.pipeline import (
    PipelineBuilder,
    ProcessGroupResourceUsage,
    ProcessGroupStatsMonitor,
    _monitor,
)

FIELDS = (
    "pid",
    "pgid",
    "cpu_percent",
    "rss_bytes",
    "pss_bytes",
    "private_bytes",
    "disk_read_bytes",
    "disk_write_bytes",
    "num_procs",
    "net_rx_bytes",
    "net_tx_bytes",
)


async def write_usage(path, usage):
    """The callback (module level, so that it pickles): one JSON line per
    sample."""
    assert isinstance(usage, ProcessGroupResourceUsage)
    with open(path, "a") as f:
        f.write(json.dumps({k: getattr(usage, k) for k in FIELDS}) + "\n")


def read_samples(path, at_least, deadline=60.0):
    end = time.monotonic() + deadline
    while True:
        if os.path.exists(path):
            with open(path) as f:
                lines = [json.loads(line) for line in f if line.endswith("\n")]
            if len(lines) >= at_least:
                return lines
        assert time.monotonic() < end, f"fewer than {at_least} samples in {deadline} s"
        time.sleep(0.05)  # polling a file another process writes


def test_native_sample_of_this_group():
    monitor = _monitor._ProcessGroupMonitor()
    first = monitor.sample()
    assert first.pgid == os.getpgrp() and first.pid == os.getpid()
    assert first.num_procs >= 1 and first.rss_bytes > 0
    assert first.cpu_percent is None and first.net_rx_bytes is None
    # A second sample has a CPU rate (this process burns some in between).
    end = time.process_time() + 0.05
    while time.process_time() < end:
        pass
    second = monitor.sample()
    assert second.cpu_percent is not None and second.cpu_percent > 0
    assert second.net_rx_bytes is not None and second.net_rx_bytes >= 0
    assert second.problems == []


def test_the_monitor_process_samples_the_group_and_ends_with_the_task(tmp_path):
    path = str(tmp_path / "usage.jsonl")
    monitor = ProcessGroupStatsMonitor(functools.partial(write_usage, path), interval=0.05)

    async def main():
        task = asyncio.create_task(monitor.run())
        await asyncio.get_running_loop().run_in_executor(None, read_samples, path, 3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    before = {p.pid for p in multiprocessing.active_children()}
    asyncio.run(main())
    samples = read_samples(path, 3)
    assert {p.pid for p in multiprocessing.active_children()} == before  # the monitor ended
    assert all(s["pgid"] == os.getpgrp() for s in samples)
    assert all(s["pid"] != os.getpid() for s in samples)  # sampled by its own process
    assert all(s["num_procs"] >= 2 for s in samples)  # this process and the monitor
    assert samples[0]["cpu_percent"] is None and samples[1]["cpu_percent"] is not None
    assert all(s["rss_bytes"] > 0 for s in samples)


def test_as_a_background_task_of_a_pipeline(tmp_path):
    path = str(tmp_path / "usage.jsonl")

    def slow(x):
        time.sleep(0.01)
        return x

    p = (
        PipelineBuilder()
        .add_source(range(10**6))
        .pipe(slow)
        .add_sink(2)
        .build(
            num_threads=1,
            background_tasks=[lambda: ProcessGroupStatsMonitor(functools.partial(write_usage, path), interval=0.05)],
        )
    )
    before = {c.pid for c in multiprocessing.active_children()}
    with p.auto_stop():
        it = iter(p)
        next(it)
        read_samples(path, 2)
        assert len({c.pid for c in multiprocessing.active_children()} - before) == 1
    # The end of the pipeline cancels the task, which ends the process.
    end = time.monotonic() + 30
    while {c.pid for c in multiprocessing.active_children()} - before:
        assert time.monotonic() < end, "the monitor process outlived its pipeline"
        time.sleep(0.05)


def test_rejects_a_bad_interval():
    with pytest.raises(ValueError, match="interval"):
        ProcessGroupStatsMonitor(write_usage, interval=0)
