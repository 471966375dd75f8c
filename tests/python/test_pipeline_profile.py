# SPDX-License-Identifier: Apache-2.0
"""profile_pipeline, its hooks and callbacks, and the diagnostic mode."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from feedline.pipeline import PipelineBuilder, ProfileHook, ProfileResult, config, profile_pipeline
from feedline.pipeline.defs import Aggregate, Pipe, PipelineConfig, SinkConfig, SourceConfig


def spin(x):
    end = time.thread_time() + 0.0002  # Python, holding the GIL
    while time.thread_time() < end:
        pass
    return x


class Seen:
    """An op that records what it was given."""

    def __init__(self):
        self.lock = threading.Lock()
        self.items = []

    def __call__(self, x):
        with self.lock:
            self.items.append(x)
        return x


def test_each_stage_runs_alone_at_each_thread_count_and_feeds_the_next(caplog):
    seen = Seen()
    cfg = PipelineConfig(
        src=SourceConfig(range(1000)),
        pipes=[Pipe(lambda x: 2 * x, concurrency=3), Pipe(spin), Aggregate(8), Pipe(seen)],
        sink=SinkConfig(3),
    )
    got = []
    with caplog.at_level(logging.INFO, logger="feedline.pipeline"):
        results = profile_pipeline(cfg, num_inputs=64, callback=got.append)
    assert results == got
    assert [r.name for r in results] == ["<lambda>", "spin", "aggregate(8)", "Seen"]
    for r in results:
        assert isinstance(r, ProfileResult)
        expected = [1] if r.name.startswith("aggregate") else [32, 16, 8, 4, 1]
        assert [s.concurrency for s in r.stats] == expected
        for s in r.stats:
            assert s.qps > 0 and 0 <= s.occupancy_rate <= 1
    # Only the first 64 items were fetched; the doubled values went on to
    # spin, batched by the aggregate; the last stage got 8 batches per run.
    assert len(seen.items) == 5 * 8
    assert sorted(x for batch in seen.items[-8:] for x in batch) == [2 * i for i in range(64)]
    # The engine's verdict on each run (test_pipeline_gil.py tests them).
    kinds = {s.bottleneck.split(":")[0] for r in results for s in r.stats}
    assert kinds <= {"stage", "gil", "threads", "consumer"}, kinds
    messages = [r.getMessage() for r in caplog.records]
    assert "Profiling Stage: spin" in messages
    assert " - Concurrency: 32" in messages
    assert any(m.startswith(" - QPS: ") for m in messages)
    assert any(m.startswith(" - Occupancy Rate: ") for m in messages)


class Recorder(ProfileHook):
    def __init__(self):
        self.events = []

    @contextlib.contextmanager
    def stage_profile_hook(self, stage, concurrency):
        self.events.append(("stage", stage.name, concurrency))
        yield

    @contextlib.contextmanager
    def pipeline_profile_hook(self):
        self.events.append("begin")
        yield
        self.events.append("end")


def test_hooks_wrap_every_run_and_defaults_come_from_config():
    cfg = PipelineConfig(src=SourceConfig(range(10)), pipes=[Pipe(lambda x: x)], sink=SinkConfig(1))
    hook = Recorder()
    profile_pipeline(cfg, num_inputs=10, hook=hook)
    assert hook.events == ["begin", *(("stage", "<lambda>", n) for n in (32, 16, 8, 4, 1)), "end"]
    default, got = Recorder(), []
    config.set_default_profile_hook(default)
    config.set_default_profile_callback(got.append)
    try:
        results = profile_pipeline(cfg, num_inputs=10)
    finally:
        config.set_default_profile_hook(None)
        config.set_default_profile_callback(None)
    assert default.events[0] == "begin" and got == list(results)
    with pytest.raises(TypeError):
        config.set_default_profile_hook(object())


def test_only_local_rank_zero_profiles(monkeypatch):
    calls = []
    cfg = PipelineConfig(src=SourceConfig(range(5)), pipes=[Pipe(calls.append)], sink=SinkConfig(1))
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert profile_pipeline(cfg, num_inputs=5) == []
    assert calls == []
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert len(profile_pipeline(cfg, num_inputs=5)) == 1


def test_an_empty_source_and_bad_arguments_raise():
    cfg = PipelineConfig(src=SourceConfig([]), pipes=[Pipe(lambda x: x)], sink=SinkConfig(1))
    with pytest.raises(RuntimeError, match="the source gave no items"):
        profile_pipeline(cfg)
    with pytest.raises(ValueError, match="num_inputs"):
        profile_pipeline(cfg, num_inputs=0)
    with pytest.raises(TypeError):
        profile_pipeline(PipelineBuilder())


def test_diagnostic_mode_profiles_at_the_first_read_and_exits(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent(
            """
            import logging
            from feedline.pipeline import PipelineBuilder

            logging.basicConfig(level=logging.INFO)
            pipeline = PipelineBuilder().add_source(range(100)).pipe(lambda x: x + 1).add_sink(2).build(num_threads=2)
            with pipeline.auto_stop():
                for x in pipeline:
                    print("trained on", x)
            print("done")
            """
        )
    )
    env = {"FEEDLINE_PIPELINE_DIAGNOSTIC_MODE": "1", "FEEDLINE_PIPELINE_DIAGNOSTIC_MODE_NUM_ITEMS": "20"}
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )
    assert done.returncode == 0, done.stderr
    assert "trained on" not in done.stdout and "done" not in done.stdout
    assert "profiling the pipeline with 20 inputs" in done.stderr
    assert "Profiling Stage: <lambda>" in done.stderr
    # SPDL's variable works too; a false value runs the pipeline.
    off = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "SPDL_PIPELINE_DIAGNOSTIC_MODE": "0"},
    )
    assert off.returncode == 0 and off.stdout.endswith("done\n"), off.stderr
