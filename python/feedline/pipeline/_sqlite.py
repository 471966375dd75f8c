"""SQLiteStatsWriter: per-interval statistics in an SQLite database.

The tables of SPDL's SQLite logger example, so that its queries and plots
work unchanged, filled from the engine's snapshots: each report adds, per
stage, what happened since the previous report of the same pipeline.

- ``task_stats(timestamp, name, num_tasks, num_failures, ave_time,
  p90_time, p99_time)``: calls, failed calls and call durations (seconds)
  of the interval, per stage.
- ``queue_stats(timestamp, name, elapsed, num_items, ave_put_time,
  ave_get_time, p90_put_time, p90_get_time, p99_put_time, p99_get_time,
  occupancy_rate)``: per input queue. The engine keeps wait totals, not
  their distributions, so the ``p90``/``p99`` columns are NULL.
- ``event_stats(timestamp, event_name)``: events the program logs with
  :meth:`SQLiteStatsWriter.log_event` (e.g. from ``gc.callbacks``).

Rows are written on a background thread of the writer, so a report costs
the pipeline's reporter thread no disk I/O; :meth:`close` writes the rest.
"""

from __future__ import annotations

import logging
import queue
import sqlite3
import threading
import time
from typing import Any

from ._hooks import queue_stats, task_stats

__all__ = ["SQLiteStatsWriter"]

_INSERTS = (
    "INSERT INTO task_stats VALUES (?, ?, ?, ?, ?, ?, ?)",
    "INSERT INTO queue_stats VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "INSERT INTO event_stats VALUES (?, ?)",
)
_LG = logging.getLogger("feedline.pipeline")
_BUSY_TIMEOUT = 30.0  # seconds a write waits for a database another connection holds

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS task_stats (
        timestamp REAL, name TEXT, num_tasks INTEGER, num_failures INTEGER,
        ave_time REAL, p90_time REAL, p99_time REAL)""",
    """CREATE TABLE IF NOT EXISTS queue_stats (
        timestamp REAL, name TEXT, elapsed REAL, num_items INTEGER,
        ave_put_time REAL, ave_get_time REAL, p90_put_time REAL, p90_get_time REAL,
        p99_put_time REAL, p99_get_time REAL, occupancy_rate REAL)""",
    "CREATE TABLE IF NOT EXISTS event_stats (timestamp REAL, event_name TEXT)",
    "CREATE INDEX IF NOT EXISTS task_stats_timestamp ON task_stats(timestamp)",
    "CREATE INDEX IF NOT EXISTS queue_stats_timestamp ON queue_stats(timestamp)",
    "CREATE INDEX IF NOT EXISTS event_stats_timestamp ON event_stats(timestamp)",
)


class SQLiteStatsWriter:
    """A stats callback (``build(stats_callback=writer,
    report_stats_interval=s)``) that appends each interval to ``path``."""

    def __init__(self, path: str):
        self.path = str(path)
        self._previous: dict[str, Any] = {}  # pipeline name -> last snapshot
        self._rows: queue.SimpleQueue = queue.SimpleQueue()
        self._closed = False
        self._lost = 0
        self._lock = threading.Lock()
        with sqlite3.connect(self.path) as db:
            for statement in _SCHEMA:
                db.execute(statement)
        self._thread = threading.Thread(target=self._write_rows, name="feedline_sqlite_stats", daemon=True)
        self._thread.start()

    def __call__(self, stats) -> None:
        now = time.time()
        with self._lock:
            if self._closed:
                return
            before = self._previous.get(stats.name)
            self._previous[stats.name] = stats
        tasks, queues = [], []
        for i, s in enumerate(stats.stages):
            old = before.stages[i] if before is not None and i < len(before.stages) else None
            if s.kind not in ("sink", "merge"):
                t = task_stats(s, old)
                tasks.append((now, s.name, t.num_tasks, t.num_failures, t.ave_time, t.p90_time, t.p99_time))
            if s.kind == "source":
                continue
            q = queue_stats(s, old)
            got = q.num_items
            # Columns without a value for the interval (no items, or wait
            # distributions the engine does not keep) are NULL.
            queues.append(
                (
                    now,
                    s.name,
                    q.elapsed,
                    got,
                    q.ave_put_time if got else None,
                    q.ave_get_time if got else None,
                    None,
                    None,
                    None,
                    None,
                    q.occupancy_rate if q.elapsed > 0 else None,
                )
            )
        self._rows.put((tasks, queues, []))

    def log_event(self, name: str) -> None:
        """Records an event (a row of ``event_stats``) at the current time."""
        if not isinstance(name, str):
            raise TypeError(f"SQLiteStatsWriter.log_event: name must be a str, got {type(name).__name__}")
        self._rows.put(([], [], [(time.time(), name)]))

    @property
    def lost_rows(self) -> int:
        """Rows that could not be written (each failed write is logged; the
        first in full)."""
        return self._lost

    def _write_rows(self) -> None:
        # A database another connection holds is waited for (up to
        # _BUSY_TIMEOUT s); a write that still fails costs its rows, which
        # are counted and logged, and the writer goes on with the next.
        db = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT)
        try:
            while True:
                batch = self._rows.get()
                if batch is None:
                    return
                tasks, queues, events = batch
                try:
                    with db:
                        for sql, rows in zip(_INSERTS, batch):
                            if rows:
                                db.executemany(sql, rows)
                except sqlite3.Error as e:
                    rows = len(tasks) + len(queues) + len(events)
                    self._lost += rows
                    _LG.warning(
                        "SQLiteStatsWriter(%s): %d row(s) not written (%d so far): %s: %s",
                        self.path,
                        rows,
                        self._lost,
                        type(e).__name__,
                        e,
                    )
        finally:
            db.close()

    def close(self) -> None:
        """Writes every row reported so far and stops the writer thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._rows.put(None)
        self._thread.join()
