# SPDX-License-Identifier: Apache-2.0
"""SQLiteStatsWriter: the intervals of every report, in the tables of
SPDL's SQLite logger example."""

from __future__ import annotations

import sqlite3
import time

import pytest

from feedline.pipeline import PipelineBuilder, SQLiteStatsWriter


def slow(x):
    time.sleep(0.002)
    if x % 25 == 3:
        raise ValueError("bad item")
    return x


def test_intervals_add_up_to_the_totals(tmp_path):
    writer = SQLiteStatsWriter(tmp_path / "stats.db")
    pipeline = (
        PipelineBuilder()
        .add_source(range(200))
        .pipe(slow, concurrency=2)
        .add_sink(4)
        .build(num_threads=2, report_stats_interval=0.05, stats_callback=writer)
    )
    with pipeline.auto_stop():
        assert len(list(pipeline)) == 192
    writer.log_event("gc_start")
    writer.close()
    writer.close()  # idempotent
    stats = pipeline.stats()
    db = sqlite3.connect(tmp_path / "stats.db")
    tasks = dict(db.execute("SELECT name, SUM(num_tasks) FROM task_stats GROUP BY name"))
    assert tasks == {s.name: s.calls for s in stats.stages if s.kind != "sink"}
    failures = dict(db.execute("SELECT name, SUM(num_failures) FROM task_stats GROUP BY name"))
    assert failures["1:slow[2]"] == 8
    reports = db.execute("SELECT COUNT(DISTINCT timestamp) FROM task_stats").fetchone()[0]
    assert reports >= 3  # intervals and the final report
    items = dict(db.execute("SELECT name, SUM(num_items) FROM queue_stats GROUP BY name"))
    assert items == {s.name: s.input_queue.items_got for s in stats.stages if s.kind != "source"}
    # Each interval's calls of the slow stage: about its 2 ms sleep.
    for ave, p99 in db.execute("SELECT ave_time, p99_time FROM task_stats WHERE name = '1:slow[2]' AND num_tasks > 0"):
        assert 0.0015 < ave <= p99 * 1.2
    for (rate,) in db.execute("SELECT occupancy_rate FROM queue_stats WHERE occupancy_rate IS NOT NULL"):
        assert -1e-9 <= rate <= 1 + 1e-9
    assert db.execute("SELECT event_name FROM event_stats").fetchall() == [("gc_start",)]
    db.close()


def test_a_failed_write_is_counted_and_logged_and_later_rows_still_land(tmp_path, caplog):
    path = tmp_path / "stats.db"
    writer = SQLiteStatsWriter(path)
    with sqlite3.connect(path) as other:  # someone removes a table under it
        other.execute("DROP TABLE event_stats")
    writer.log_event("lost")  # its write fails
    pipeline = (
        PipelineBuilder().add_source(range(20)).pipe(slow).add_sink(4).build(num_threads=1, stats_callback=writer)
    )
    with pipeline.auto_stop():
        assert len(list(pipeline)) == 19
    writer.close()  # the final report is written after the failed event
    assert writer.lost_rows == 1
    assert "SQLiteStatsWriter" in caplog.text and "1 row(s) not written" in caplog.text
    assert "no such table: event_stats" in caplog.text
    rows = sqlite3.connect(path).execute("SELECT SUM(num_tasks) FROM task_stats WHERE name LIKE '%slow%'")
    assert rows.fetchone()[0] == 20


def test_log_event_refuses_a_name_that_is_not_a_str(tmp_path):
    writer = SQLiteStatsWriter(tmp_path / "stats.db")
    try:
        with pytest.raises(TypeError, match="name must be a str, got list"):
            writer.log_event(["gc", "start"])
    finally:
        writer.close()
