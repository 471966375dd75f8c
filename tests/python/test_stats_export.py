# SPDX-License-Identifier: Apache-2.0
"""Statistics exports read back, and ``python -m feedline stats FILE``."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time

import pytest
from PIL import Image

import feedline
from feedline import _stats_cli
from feedline.pipeline import JsonLinesWriter, PipelineBuilder, PipelineStats


def slow(x):
    time.sleep(0.003)
    return x


def export(path, n=150):
    """Runs a pipeline whose slow stage is 2:slow[2], reporting every 50 ms
    into ``path``; returns its final stats."""
    writer = JsonLinesWriter(str(path))
    pipeline = (
        PipelineBuilder()
        .add_source(range(n))
        .pipe(lambda x: x, concurrency=2)
        .pipe(slow, concurrency=2)
        .add_sink(4)
        .build(num_threads=4, report_stats_interval=0.05, stats_callback=writer)
    )
    with pipeline.auto_stop():
        assert sorted(pipeline) == list(range(n))
    writer.close()
    return pipeline.stats()


def test_every_exported_record_reads_back_as_the_same_stats(tmp_path):
    final = export(tmp_path / "stats.jsonl")
    lines = (tmp_path / "stats.jsonl").read_text().splitlines()
    assert len(lines) >= 3  # intervals and the final report
    for line in lines:
        back = PipelineStats.from_json(line)
        assert back.to_json() == line
    # The last is the final report: every count and histogram is final
    # (the clock went on to the stop, so elapsed differs).
    last = PipelineStats.from_json(lines[-1])
    assert last.items_delivered == final.items_delivered == 150
    for got, want in zip(last.stages, final.stages):
        assert (got.name, got.calls, got.items_out, got.op_time.count) == (
            want.name,
            want.calls,
            want.items_out,
            want.op_time.count,
        )
        assert got.op_time.quantile(0.99) == want.op_time.quantile(0.99)
    assert (last.bottleneck().kind, last.bottleneck().stage_name) == ("stage", "2:slow[2]")


def test_a_damaged_record_is_a_format_error_naming_the_field():
    record = json.loads(PipelineBuilder().add_source(range(2)).add_sink(1).build(num_threads=1).stats().to_json())
    del record["stages"][0]["calls"]
    with pytest.raises(feedline.FormatError, match=r"stages\[0\] has no \"calls\""):
        PipelineStats.from_json(json.dumps(record))
    with pytest.raises(feedline.FormatError, match=r"stats JSON: expected a string \(at byte 1\)"):
        PipelineStats.from_json("{")


def run_stats(cwd, *args):
    return subprocess.run(
        [sys.executable, "-m", "feedline", "stats", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_stats_command_prints_the_table_names_the_bottleneck_and_plots(tmp_path):
    export(tmp_path / "stats.jsonl")
    last = PipelineStats.from_json((tmp_path / "stats.jsonl").read_text().splitlines()[-1])
    done = run_stats(tmp_path, "stats.jsonl", "--plot", "stats.png")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "stats.jsonl: " in out and "record(s) of pipeline" in out
    assert "delivered per second over " in out
    # The final record's table, as the pipeline printed it, bottleneck included.
    assert last.format_table().rstrip("\n") in out
    assert "bottleneck: 2:slow[2] (stage): busy " in out
    assert "plot: stats.png" in out
    with Image.open(tmp_path / "stats.png") as image:
        assert image.format == "PNG"
        assert image.size[0] > 500 and image.size[1] > 500
    # Another record's table.
    first = run_stats(tmp_path, "stats.jsonl", "--record", "0")
    assert first.returncode == 0, first.stderr
    line = (tmp_path / "stats.jsonl").read_text().splitlines()[0]
    assert PipelineStats.from_json(line).format_table().rstrip("\n") in first.stdout


def test_stats_command_rejects_what_is_not_an_export(tmp_path):
    export(tmp_path / "stats.jsonl", n=20)
    lines = (tmp_path / "stats.jsonl").read_text().splitlines()
    (tmp_path / "cut.jsonl").write_text(lines[0] + "\n" + lines[-1][:100] + "\n")
    done = run_stats(tmp_path, "cut.jsonl")
    assert done.returncode == 2
    assert "cut.jsonl, line 2: not a statistics record: stats JSON:" in done.stderr
    missing = run_stats(tmp_path, "nothing.jsonl")
    assert missing.returncode == 2 and "nothing.jsonl" in missing.stderr
    wrong = run_stats(tmp_path, "stats.jsonl", "--record", "99")
    assert wrong.returncode == 2 and "--record 99" in wrong.stderr


def test_reading_a_long_export_shows_progress(tmp_path, monkeypatch):
    export(tmp_path / "stats.jsonl", n=20)
    monkeypatch.setattr(_stats_cli, "PROGRESS_AFTER", 0.0)
    progress = io.StringIO()
    records = _stats_cli.read(str(tmp_path / "stats.jsonl"), progress=progress).records
    assert records
    assert progress.getvalue().endswith(f"\rreading {tmp_path / 'stats.jsonl'}: {len(records)} records, done\n")


def test_stats_command_reports_one_run_of_a_file_that_holds_several(tmp_path):
    # One file, two pipelines' records interleaved (a shared writer), then
    # a restart of the first (another program appending).
    export(tmp_path / "a.jsonl", n=60)
    export(tmp_path / "b.jsonl", n=90)
    a = (tmp_path / "a.jsonl").read_text().splitlines()
    b = (tmp_path / "b.jsonl").read_text().splitlines()
    name_a, name_b = (PipelineStats.from_json(x[0]).name for x in (a, b))
    assert name_a != name_b
    mixed = [line for pair in zip(a, b) for line in pair] + a[len(b) :] + b[len(a) :] + a
    (tmp_path / "mixed.jsonl").write_text("\n".join(mixed) + "\n")
    runs = _stats_cli.split_runs(_stats_cli.read(str(tmp_path / "mixed.jsonl")).records)
    assert [(r[0].name, len(r)) for r in runs] == [(name_a, len(a)), (name_b, len(b)), (name_a, len(a))]

    done = run_stats(tmp_path, "mixed.jsonl")
    assert done.returncode == 0, done.stderr
    assert f"3 runs ('{name_a}' ({len(a)} record(s)), '{name_b}' ({len(b)} record(s))" in done.stdout
    assert f"{len(a)} record(s) of pipeline '{name_a}'" in done.stdout
    assert PipelineStats.from_json(a[-1]).format_table().rstrip("\n") in done.stdout
    other = run_stats(tmp_path, "mixed.jsonl", "--pipeline", name_b, "--record", "0")
    assert other.returncode == 0, other.stderr
    assert f"{len(b)} record(s) of pipeline '{name_b}'" in other.stdout
    assert PipelineStats.from_json(b[0]).format_table().rstrip("\n") in other.stdout
    missing = run_stats(tmp_path, "mixed.jsonl", "--pipeline", "nope")
    assert missing.returncode == 2 and "--pipeline nope: no such pipeline" in missing.stderr
