"""``python -m feedline stats FILE``: reads a statistics export and says
where the time went.

FILE is a JSON Lines file of ``PipelineStats.to_json()`` records, as
:class:`feedline.pipeline.JsonLinesWriter` writes them (one per report
interval, and one at the end). Each line is read back by the engine
(``PipelineStats.from_json``, C++), so the table and the bottleneck are
exactly what the running pipeline would have printed:

- the per-stage table of the last record (``--record N`` picks another),
  ending with the bottleneck stage, the figures behind the verdict and the
  advice (docs/stats.md#finding-the-bottleneck);
- with two records or more, the delivery rate over the intervals (lowest,
  median, highest) and, per interval, the bottleneck when it changed;
- a file that holds several runs (one writer for several pipelines, or
  several programs appending) is split by pipeline name and restart, and
  one run is reported: ``--pipeline NAME``, or the run of the last record;
- ``--plot OUT.png`` draws, per stage and over time, the throughput, the
  input queue's occupancy and its depth (needs matplotlib: ``pip install
  feedline[plot]``).

Reading a long file shows a progress line on stderr.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from feedline.pipeline import PipelineStats

PROGRESS_AFTER = 1.0  # seconds of reading before the progress line shows


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("file", help="a JSON Lines export of PipelineStats.to_json() records")
    ap.add_argument(
        "--record",
        type=int,
        default=-1,
        help="the record whose table to print (0 = first; negative counts from the end; default -1)",
    )
    ap.add_argument("--plot", metavar="OUT.png", help="draw throughput, occupancy and queue depth over time")
    ap.add_argument(
        "--pipeline",
        metavar="NAME",
        help="the pipeline to report when the file holds several (default: the one of the last record)",
    )


@dataclass
class Export:
    """The records of one export file, in order."""

    path: str
    records: list[PipelineStats] = field(default_factory=list)


def read(path: str, progress: TextIO | None = None) -> Export:
    """Reads every record of ``path``. Raises ValueError naming the line
    that is not a record (with the engine's FormatError as its cause)."""
    from feedline import FormatError
    from feedline.pipeline import PipelineStats

    export = Export(path)
    size = os.path.getsize(path)
    start = time.monotonic()
    shown = 0.0
    done = 0
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            done += len(raw)
            line = raw.decode("utf-8", errors="replace")
            if not line.strip():
                continue
            try:
                export.records.append(PipelineStats.from_json(line))
            except FormatError as e:
                raise ValueError(f"{path}, line {number}: not a statistics record: {e}") from e
            now = time.monotonic()
            if progress is not None and now - start >= PROGRESS_AFTER and now - shown >= 0.2:
                shown = now
                progress.write(f"\rreading {path}: {len(export.records)} records, {100 * done / max(size, 1):3.0f}%")
                progress.flush()
    if shown and progress is not None:
        progress.write(f"\rreading {path}: {len(export.records)} records, done\n")
    return export


def split_runs(records: list[PipelineStats]) -> list[list[PipelineStats]]:
    """The records of each run, in order of their first record. One writer
    may serve several pipelines (its file is appended to), so records of
    different pipelines interleave; a pipeline name whose elapsed time goes
    down starts a new run (a second pipeline of that name, or a later
    program writing to the same file)."""
    runs: list[list[PipelineStats]] = []
    current: dict[str, list[PipelineStats]] = {}
    for r in records:
        run = current.get(r.name)
        if run is None or r.elapsed < run[-1].elapsed:
            run = current[r.name] = []
            runs.append(run)
        run.append(r)
    return runs


def interval_rates(records: list[PipelineStats]) -> list[tuple[float, float]]:
    """(end time, items delivered per second) of each interval between two
    consecutive records of one run."""
    rates = []
    for before, after in zip(records, records[1:]):
        span = after.elapsed - before.elapsed
        if span > 0 and after.items_delivered >= before.items_delivered:
            rates.append((after.elapsed, (after.items_delivered - before.items_delivered) / span))
    return rates


def summary(export: Export, record: int) -> str:
    records = export.records
    if not records:
        return f"{export.path}: no records"
    chosen = records[record]
    lines = [
        f"{export.path}: {len(records)} record(s) of pipeline '{records[-1].name}', "
        f"{records[-1].elapsed:.2f}s, {records[-1].items_delivered} items delivered",
    ]
    rates = [rate for _, rate in interval_rates(records)]
    if rates:
        lines.append(
            f"delivered per second over {len(rates)} interval(s): lowest {min(rates):.1f}, "
            f"median {statistics.median(rates):.1f}, highest {max(rates):.1f}"
        )
        changes = []
        last = None
        for r in records:
            b = r.bottleneck()
            verdict = (b.kind, b.stage_name)
            if verdict != last and b.kind != "none":
                changes.append(f"  at {r.elapsed:8.2f}s: {b.stage_name or '-'} ({b.kind})")
            last = verdict
        if len(changes) > 1:
            lines.append("bottleneck so far, where it changed:")
            lines += changes
    lines.append("")
    lines.append(chosen.format_table().rstrip("\n"))
    return "\n".join(lines)


def plot(export: Export, out: str) -> None:
    """Throughput, occupancy and depth of each stage's input over time."""
    try:
        import matplotlib
    except ImportError as e:
        raise RuntimeError("--plot needs matplotlib: pip install feedline[plot]") from e
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from feedline.pipeline._hooks import queue_stats

    records = export.records
    fig, axes = plt.subplots(3, 1, figsize=(10, 9), sharex=True)
    names = [s.name for s in records[-1].stages]
    for index, name in enumerate(names):
        times, rate, occupancy, depth = [], [], [], []
        for before, after in zip(records, records[1:]):
            if index >= len(before.stages) or index >= len(after.stages):
                continue
            span = after.elapsed - before.elapsed
            if span <= 0:
                continue
            a, b = before.stages[index], after.stages[index]
            times.append(after.elapsed)
            rate.append((b.items_out - a.items_out) / span)
            # The mean fill over the interval, as the stats hooks compute it.
            lap = queue_stats(b, a)
            occupancy.append(100 * lap.occupancy_rate if lap.capacity else float("nan"))
            depth.append(b.input_queue.depth)
        axes[0].plot(times, rate, label=name)
        axes[1].plot(times, occupancy, label=name)
        axes[2].plot(times, depth, label=name)
    axes[0].set_ylabel("items out per second")
    axes[1].set_ylabel("input queue occupancy (%)")
    axes[2].set_ylabel("input queue depth")
    axes[2].set_xlabel("seconds since start")
    axes[0].legend(fontsize="small", loc="upper right")
    fig.suptitle(f"{records[-1].name}: {os.path.basename(export.path)}")
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    try:
        export = read(args.file, progress=sys.stderr)
    except (OSError, ValueError) as e:
        print(f"feedline stats: {e}", file=sys.stderr)
        return 2
    runs = split_runs(export.records)
    if len(runs) > 1 or args.pipeline is not None:
        if args.pipeline is None:
            chosen = next(r for r in runs if r[-1] is export.records[-1])
        else:
            named = [r for r in runs if r[0].name == args.pipeline]
            if not named:
                have = ", ".join(sorted({r[0].name for r in runs})) or "none"
                print(
                    f"feedline stats: --pipeline {args.pipeline}: no such pipeline in the file ({have})",
                    file=sys.stderr,
                )
                return 2
            chosen = named[-1]
        if len(runs) > 1:
            listed = ", ".join(f"'{r[0].name}' ({len(r)} record(s))" for r in runs)
            print(f"{export.path}: {len(runs)} runs ({listed}); this report is of the last run of '{chosen[0].name}'")
        export = Export(export.path, chosen)
    if export.records and not -len(export.records) <= args.record < len(export.records):
        print(f"feedline stats: --record {args.record}: the file has {len(export.records)} records", file=sys.stderr)
        return 2
    print(summary(export, args.record))
    if args.plot:
        if len(export.records) < 2:
            print("feedline stats: --plot needs two records or more (report_stats_interval)", file=sys.stderr)
            return 2
        plot(export, args.plot)
        print(f"plot: {args.plot}")
    return 0
