# SPDX-License-Identifier: Apache-2.0
"""Per-item overhead of pipeline engines on a 3-stage no-op pipeline.

What is measured: how many items per second an engine moves when the work
itself costs nothing, i.e. the engine's own cost per item (scheduling, queue
handoff, GIL traffic, waking the consumer). Every contender does the same work:
the ints ``0 .. N-1`` from the same kind of source go through three identity
stages into a sink of the same size, built with ``num_threads=2``, and are
drained by the same consumer loop (count the items, sum them). The contenders:

- ``loop``: a plain Python loop, ``for x in range(N): noop(noop(noop(x)))``.
  No engine at all; the floor for anything that calls Python per item.
- ``spdl``: ``spdl.pipeline.PipelineBuilder().add_source(range(N))
  .pipe(noop).pipe(noop).pipe(noop).add_sink(S).build(num_threads=2)``,
  iterated as ``with p.auto_stop(): for x in p: ...``.
- ``feedline-py``: ``feedline.pipeline.PipelineBuilder`` with exactly the same
  calls: Python ops, so each stage takes the GIL for its call.
- ``feedline-native``: the same, but every stage is
  ``_feedline_testing.identity()``, a C++ no-op that never takes the GIL. It
  comes from the test-only extension (tests/python/native/, ``make
  test-ext``), not a public API; real native ops (e.g. ``feedline.io.ops``)
  are used the same way.
- ``feedline-native-src``: as ``feedline-native``, with the native source
  ``_feedline_testing.range_source(N)`` instead of ``range(N)``,
  so only the consumer loop touches Python.

Each configuration runs twice: with ``add_sink(3)`` (SPDL's default, which
limits how many items are handed to the consumer per wake-up) and with
``add_sink(64)``. The plain loop has no sink and is run once.

How it is measured (see the project's benchmarking notes): every contender
runs in its own process (this script with ``--worker``), warms up once on a
tenth of its items, then does ``--repeat`` timed runs (default 3) and reports
the median. A timed run covers building, starting, draining and stopping the
pipeline, i.e. what a user pays per epoch. CPU time is user+sys of the worker
process and its children over the timed run (all threads included), peak RSS
is the worker's ``ru_maxrss`` (self + children). A contender whose item count
or checksum is wrong is flagged and makes the script exit 1.

Each contender gets its own N (SPDL is slow, a plain loop is fast) so that
each timed run takes on the order of a second; ratios compare items/s, so
different N do not matter.

Goals: feedline with Python ops >= 10x SPDL's items/s; with native ops
>= 100x SPDL's items/s.

Run::

    python bench/python/pipeline_overhead.py             # full run, under a minute
    python bench/python/pipeline_overhead.py --quick     # smoke run, seconds
    python bench/python/pipeline_overhead.py --scale 2 --repeat 5
    python bench/python/pipeline_overhead.py --only spdl,feedline-py --sinks 3
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import time

from benchlib import cpu_seconds, import_test_ext, peak_rss_kib

# -- contenders ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Contender:
    name: str
    label: str
    default_n: int  # about 1 s per timed run on a 2-core VM


CONTENDERS = [
    Contender("loop", "plain Python loop", 2_000_000),
    Contender("spdl", "SPDL, Python ops", 3_000),
    Contender("feedline-py", "feedline, Python ops", 100_000),
    Contender("feedline-native", "feedline, native ops", 200_000),
    Contender("feedline-native-src", "feedline, native ops + source", 200_000),
    # Observability on: a trace of 1 call in 100 per stage, and a JSON Lines
    # report every 0.1 s (both written out at the end of each run).
    Contender("feedline-py+trace", "feedline, Python ops, traced 1/100", 100_000),
    Contender("feedline-native+trace", "feedline, native ops, traced 1/100", 200_000),
    Contender("feedline-native+export", "feedline, native ops, JSON every 0.1 s", 200_000),
]
BY_NAME = {c.name: c for c in CONTENDERS}

NUM_THREADS = 2
DEFAULT_SINKS = (3, 64)


def noop(x):
    return x


# -- worker side: runs one contender in its own process -------------------------


def _three_noops(builder, source, make_op, sink, **options):
    """The pipeline every engine builds: source -> 3 identity stages -> sink."""
    return (
        builder.add_source(source)
        .pipe(make_op())
        .pipe(make_op())
        .pipe(make_op())
        .add_sink(sink)
        .build(num_threads=NUM_THREADS, **options)
    )


def _make_builder(name, sink):
    """Returns a function that builds a fresh pipeline of n items.

    Imports happen here, not at the top, so that each worker imports only
    the engine it measures (and the parent imports none).
    """
    if name == "spdl":
        # SPDL logs every pipeline start and stop at INFO; keep it quiet.
        logging.getLogger("spdl").setLevel(logging.WARNING)
        import spdl.pipeline

        return lambda n: _three_noops(spdl.pipeline.PipelineBuilder(), range(n), lambda: noop, sink)

    import feedline.pipeline

    testing = import_test_ext()

    if name == "feedline-py":
        return lambda n: _three_noops(feedline.pipeline.PipelineBuilder(), range(n), lambda: noop, sink)
    if name == "feedline-native":
        return lambda n: _three_noops(feedline.pipeline.PipelineBuilder(), range(n), testing.identity, sink)
    if name == "feedline-native-src":
        return lambda n: _three_noops(
            feedline.pipeline.PipelineBuilder(), testing.range_source(n), testing.identity, sink
        )
    if name in ("feedline-py+trace", "feedline-native+trace"):
        op = (lambda: noop) if name.startswith("feedline-py") else testing.identity
        return lambda n: _Traced(_three_noops(feedline.pipeline.PipelineBuilder(), range(n), op, sink, trace_every=100))
    if name == "feedline-native+export":
        writer = feedline.pipeline.JsonLinesWriter(open(os.devnull, "w"))  # noqa: SIM115 (kept for the run)
        return lambda n: _three_noops(
            feedline.pipeline.PipelineBuilder(),
            range(n),
            testing.identity,
            sink,
            report_stats_interval=0.1,
            stats_callback=writer,
        )
    raise ValueError(f"unknown contender {name!r}")


class _Traced:
    """A traced pipeline whose trace is written out once it is drained, as
    a user would (the writing is part of the timed run)."""

    def __init__(self, pipeline):
        self.pipeline = pipeline

    def auto_stop(self):
        return self.pipeline.auto_stop()

    def __iter__(self):
        yield from self.pipeline
        self.pipeline.write_trace(os.devnull)


def _drain(pipeline):
    """The consumer loop, the same for every engine."""
    count = total = 0
    with pipeline.auto_stop():
        for x in pipeline:
            count += 1
            total += x
    return count, total


def _run_loop(n):
    # Same consumer work as _drain, so the floor is comparable.
    count = total = 0
    for x in range(n):
        y = noop(noop(noop(x)))
        count += 1
        total += y
    return count, total


def _timed(run, n):
    cpu0, wall0 = cpu_seconds(), time.perf_counter()
    count, total = run(n)
    wall, cpu = time.perf_counter() - wall0, cpu_seconds() - cpu0
    return {"wall_s": wall, "cpu_s": cpu, "count": count, "sum_ok": total == n * (n - 1) // 2}


def _warmup_size(n):
    # Enough to import, start threads and fault in every code path once.
    return max(n // 10, 1)


def worker_main(name, n, sink, repeat):
    """Measures one contender; prints one JSON line on stdout."""
    try:
        if name == "loop":
            run = _run_loop
        else:
            build = _make_builder(name, sink)
            run = lambda n: _drain(build(n))  # noqa: E731
    except ImportError as e:
        if name != "spdl":
            raise  # feedline missing is a failure, not an optional baseline
        print(json.dumps({"unavailable": str(e)}))
        return
    warmup = _timed(run, _warmup_size(n))
    runs = [_timed(run, n) for _ in range(repeat)]
    print(json.dumps({"warmup": warmup, "runs": runs, "peak_rss_kib": peak_rss_kib()}))


# -- parent side: runs the workers and prints the table -----------------------------


@dataclasses.dataclass
class Result:
    contender: Contender
    n: int
    items_per_s: float | None = None
    cpu_us_per_item: float | None = None
    peak_rss_mib: float | None = None
    items_ok: bool = False
    note: str = ""  # why items_ok is False, or why there are no numbers
    unavailable: bool = False


def _run_worker(contender, n, sink, repeat, timeout):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", contender.name]
    cmd += ["--n", str(n), "--sink", str(sink), "--repeat", str(repeat)]
    result = Result(contender, n)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        result.note = f"timed out after {timeout} s"
        return result
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        result.note = f"worker failed (exit {proc.returncode})"
        sys.stdout.flush()  # keep the worker's traceback after what we printed
        sys.stderr.write(f"--- {contender.name} sink={sink} stderr ---\n{proc.stderr}\n")
        return result
    _fill(result, json.loads(lines[-1]))
    return result


def _fill(result, report):
    """Turns a worker's JSON report into medians and an items-ok verdict."""
    if "unavailable" in report:
        result.unavailable = True
        result.note = report["unavailable"]
        return
    runs = report["runs"]
    n = result.n
    result.items_per_s = statistics.median(n / r["wall_s"] for r in runs)
    result.cpu_us_per_item = statistics.median(r["cpu_s"] / n * 1e6 for r in runs)
    result.peak_rss_mib = report["peak_rss_kib"] / 1024
    bad = [r for r in runs if r["count"] != n or not r["sum_ok"]]
    warmup = report["warmup"]
    if bad:
        r = bad[0]
        result.note = f"got {r['count']} of {n}" + ("" if r["sum_ok"] else ", wrong sum")
    elif warmup["count"] != _warmup_size(n) or not warmup["sum_ok"]:
        result.note = "warm-up returned wrong items"
    result.items_ok = not result.note


def _fmt_rate(x):
    if x is None:
        return "-"
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if x >= scale:
            return f"{x / scale:.2f} {unit}"
    return f"{x:.0f}"


def _fmt_ratio(x, base):
    if x is None or base is None:
        return "n/a"
    r = x / base
    if r >= 100:
        return f"{r:,.0f}x"
    if r >= 1:
        return f"{r:.2f}x"
    return f"{r:.3f}x" if r >= 0.001 else "<0.001x"


def _fmt_num(x, fmt):
    return "-" if x is None else format(x, fmt)


def print_table(title, results, spdl, loop):
    spdl_rate = spdl.items_per_s if spdl and spdl.items_ok else None
    loop_rate = loop.items_per_s if loop and loop.items_ok else None
    header = ("contender", "N", "items/s", "vs SPDL", "vs loop", "CPU us/item", "peak RSS MiB", "items ok")
    rows = []
    for r in results:
        ok = "yes" if r.items_ok else ("n/a" if r.unavailable else f"NO: {r.note}")
        rows.append(
            (
                r.contender.label,
                f"{r.n:,}",
                _fmt_rate(r.items_per_s),
                _fmt_ratio(r.items_per_s, spdl_rate),
                _fmt_ratio(r.items_per_s, loop_rate),
                _fmt_num(r.cpu_us_per_item, ".2f"),
                _fmt_num(r.peak_rss_mib, ".1f"),
                ok,
            )
        )
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]

    def line(cells):
        # Left-align the label, right-align the numbers.
        parts = [str(cells[0]).ljust(widths[0])]
        parts += [str(c).rjust(w) for c, w in zip(cells[1:-1], widths[1:-1])]
        parts.append(str(cells[-1]))
        return "  ".join(parts)

    print(f"\n{title}")
    print(line(header))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print(line(row))


def _version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def print_header(args, sizes):
    cpus = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cpus
    print("Pipeline per-item overhead: range(N) -> 3 no-op stages -> sink, build(num_threads=2)")
    print(f"Python {platform.python_version()}, CPUs: {cpus} ({usable} usable)")
    print(f"feedline {_version('feedline') or 'not installed'}, SPDL {_version('spdl') or 'not installed'}")
    print(f"Median of {args.repeat} timed run(s) after one warm-up, each contender in its own process.")
    print("Each contender has its own N (about 1 s per run); ratios compare items/s, so N may differ.")
    print("A run = build + start + drain + stop. CPU = user+sys of the worker (all threads + children).")
    print("N: " + ", ".join(f"{name}={n:,}" for name, n in sizes.items()))
    if args.quick:
        # Tiny N: start-up and build dominate, so the ratios mean nothing.
        print("--quick: smoke run only; do not read the numbers.")


# -- main ------------------------------------------------------------------------


def _sizes(args, names):
    if args.n is not None:
        return {name: args.n for name in names}
    return {name: max(int(BY_NAME[name].default_n * args.scale), 1) for name in names}


def parent_main(args):
    names = [c.name for c in CONTENDERS] if not args.only else args.only.split(",")
    for name in names:
        if name not in BY_NAME:
            sys.exit(f"unknown contender {name!r}; choose from {', '.join(BY_NAME)}")
    sizes = _sizes(args, names)
    print_header(args, sizes)

    def run(name, sink):
        return _run_worker(BY_NAME[name], sizes[name], sink, args.repeat, args.timeout)

    # The loop has no sink: measure it once and show it in every table.
    loop = run("loop", 0) if "loop" in names else None
    spdl_missing = False
    failed = loop is not None and not loop.items_ok
    for sink in args.sinks:
        results = [loop] if loop else []
        spdl = None
        for name in names:
            if name == "loop" or (name == "spdl" and spdl_missing):
                continue
            result = run(name, sink)
            if name == "spdl":
                spdl = result
                if result.unavailable:
                    spdl_missing = True
                    print("SPDL not installed (pip install spdl)")
                    continue
            results.append(result)
            failed |= not result.items_ok
        print_table(f"add_sink({sink})", results, spdl, loop)
    return 1 if failed else 0


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=3, help="timed runs per contender (median is reported)")
    p.add_argument("--scale", type=float, default=1.0, help="multiply every contender's default N")
    p.add_argument("--n", type=int, help="items per timed run, for every contender (overrides --scale)")
    p.add_argument(
        "--sinks",
        type=lambda s: [int(x) for x in s.split(",")],
        default=list(DEFAULT_SINKS),
        help="comma-separated add_sink sizes (default 3,64)",
    )
    p.add_argument("--only", help=f"comma-separated contenders out of {','.join(BY_NAME)}")
    p.add_argument("--timeout", type=float, default=600, help="seconds before a worker is given up on")
    p.add_argument("--quick", action="store_true", help="smoke run: tiny N, 1 repeat")
    # Internal: run one contender in this process.
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--sink", type=int, default=3, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.scale, args.repeat = 0.01, 1
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        worker_main(args.worker, args.n, args.sink, args.repeat)
        return 0
    return parent_main(args)


if __name__ == "__main__":
    sys.exit(main())
