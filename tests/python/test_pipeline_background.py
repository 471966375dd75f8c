# SPDX-License-Identifier: Apache-2.0
"""Background tasks beside a pipeline: started with it, cancelled at its
end, their errors logged and never fatal."""

from __future__ import annotations

import asyncio
import logging
import threading

from feedline.pipeline import BackgroundTask, PipelineBuilder, config


class Ticker(BackgroundTask):
    """Ticks until cancelled; records how it ended."""

    instances: list[Ticker] = []

    def __init__(self):
        self.started = threading.Event()
        self.ticks = 0
        self.ended = None
        Ticker.instances.append(self)

    async def run(self):
        self.started.set()
        try:
            while True:
                self.ticks += 1
                await asyncio.sleep(0.001)
        except asyncio.CancelledError:
            self.ended = "cancelled"
            raise


class Failing(BackgroundTask):
    async def run(self):
        raise RuntimeError("the monitor broke")


def test_tasks_run_while_the_pipeline_runs_and_are_cancelled_at_its_end():
    release = threading.Event()
    seen = []

    def source():
        yield 0
        assert release.wait(30)  # the pipeline runs until the task has run
        yield 1

    tickers = []
    pipeline = (
        PipelineBuilder()
        .add_source(source())
        .add_sink(1)
        .build(num_threads=1, background_tasks=[lambda: tickers.append(Ticker()) or tickers[-1]])
    )
    with pipeline.auto_stop():
        for x in pipeline:
            seen.append(x)
            if x == 0:
                assert tickers[0].started.wait(30)
                release.set()
    assert seen == [0, 1]
    # Cancelled and awaited by the end of the pipeline, not left running.
    assert tickers[0].ended == "cancelled"
    assert tickers[0].ticks >= 1


class _Logged(logging.Handler):
    """Sets `event` once a record containing `text` is logged."""

    def __init__(self, text):
        super().__init__()
        self.text = text
        self.event = threading.Event()

    def emit(self, record):
        if self.text in record.getMessage():
            self.event.set()


def test_a_failing_task_is_logged_and_the_pipeline_goes_on(caplog):
    # The pipeline goes on past the task's failure: its source waits for the
    # failure to be logged (a pipeline that ends before a task has run
    # cancels it unrun, and nothing is logged).
    logged = _Logged("Background task failed: Failing")
    logger = logging.getLogger("feedline.pipeline")

    def source():
        yield from range(25)
        assert logged.event.wait(30)
        yield from range(25, 50)

    logger.addHandler(logged)
    try:
        with caplog.at_level(logging.ERROR, logger="feedline.pipeline"):
            pipeline = (
                PipelineBuilder().add_source(source()).add_sink(2).build(num_threads=1, background_tasks=[Failing])
            )
            with pipeline.auto_stop():
                assert list(pipeline) == list(range(50))
    finally:
        logger.removeHandler(logged)
    with caplog.at_level(logging.ERROR, logger="feedline.pipeline"):
        broken = (
            PipelineBuilder().add_source(range(5)).add_sink(2).build(num_threads=1, background_tasks=[lambda: 1 / 0])
        )
        with broken.auto_stop():
            assert list(broken) == list(range(5))
    messages = [r.getMessage() for r in caplog.records]
    assert any("Background task failed: Failing: RuntimeError: the monitor broke" in m for m in messages), messages
    assert any(m.startswith("Background task factory failed") and "ZeroDivisionError" in m for m in messages)


def test_default_tasks_run_with_the_pipelines_own():
    ran = {"default": threading.Event(), "own": threading.Event()}

    def make(label):
        class Task(BackgroundTask):
            async def run(self):
                ran[label].set()

        return Task

    def source():
        for event in ran.values():  # the pipeline lasts until both ran
            assert event.wait(30)
        yield from range(3)

    config.set_default_background_tasks([make("default")])
    try:
        pipeline = (
            PipelineBuilder().add_source(source()).add_sink(1).build(num_threads=1, background_tasks=[make("own")])
        )
        with pipeline.auto_stop():
            assert list(pipeline) == [0, 1, 2]
    finally:
        config.set_default_background_tasks(None)
    assert config.get_default_background_tasks() is None


class Careful(BackgroundTask):
    """Awaits in its cleanup when cancelled."""

    def __init__(self):
        self.started = threading.Event()
        self.cleaned = False

    async def run(self):
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.sleep(0.05)  # a cleanup that takes a while on the loop
            self.cleaned = True
            raise


async def _plus_one(x):
    return x + 1


def _loop_threads():
    return {t for t in threading.enumerate() if t.name.startswith("feedline_asyncio")}


def test_a_tasks_cleanup_runs_on_the_loop_before_it_closes():
    # stop() closed the event loop before it cancelled the tasks: a task
    # that awaited in its cleanup never finished it.
    tasks = []
    pipeline = (
        PipelineBuilder()
        .add_source(range(4))
        .pipe(_plus_one)
        .add_sink(1)
        .build(num_threads=1, background_tasks=[lambda: tasks.append(Careful()) or tasks[-1]])
    )
    with pipeline.auto_stop():
        assert tasks[0].started.wait(30)
        assert list(pipeline) == [1, 2, 3, 4]
    assert tasks[0].cleaned


def test_tasks_without_async_stages_leave_no_loop_thread():
    # The loop the tasks run on belonged to the pipeline only when a stage
    # was async: without one, its thread outlived the pipeline.
    before = _loop_threads()
    tickers = []
    pipeline = (
        PipelineBuilder()
        .add_source(range(3))
        .add_sink(1)
        .build(num_threads=1, background_tasks=[lambda: tickers.append(Ticker()) or tickers[-1]])
    )
    with pipeline.auto_stop():
        assert tickers[0].started.wait(30)
        assert list(pipeline) == [0, 1, 2]
    assert _loop_threads() - before == set()
