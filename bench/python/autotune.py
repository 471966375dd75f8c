# SPDX-License-Identifier: Apache-2.0
"""Autotune against hand-tuned concurrency, on three synthetic pipelines and the image pipeline.

What is measured: how close ``build(..., autotune=Autotune(cpu_budget=B))``
gets, starting from concurrency 1 on every stage and one active thread, to
the best output rate found by hand over a grid of fixed concurrencies, how
soon, and whether it keeps the pipeline within the CPU budget. The pipelines
(each ``source -> stages -> add_sink(...)``, drained by the same consumer
loop, which counts and checks every item):

- ``io``: ``range_source -> sleep(5000) -> cpu_work(200)``: an I/O-bound
  stage (5 ms asleep, no CPU, no GIL) then a small fixed CPU cost; the best
  rate needs a high concurrency on the sleeping stage.
- ``cpu``: ``range_source -> cpu_work(1000) -> cpu_work(500)``: CPU-bound;
  the best rate is set by the CPUs (and the budget), more threads do not
  help.
- ``mixed-py``: ``range_source -> a Python op sleeping 2 ms (time.sleep,
  which releases the GIL) -> cpu_work(300)``: Python calls and the GIL in
  the way of a high concurrency.
- ``images``: the native image pipeline of ``images.py``: the JPEGs of
  ``examples/python/image_demo.py`` (cycled) ``-> ops.read_file() ->
  aggregate(32) -> ops.decode_batch(resize_shorter=256, crop=224,
  layout="CHW", dtype="float32", mean, std) -> add_sink(3)``. The two pipe
  stages are the knobs (the aggregate keeps its concurrency, as autotune
  leaves it alone too); rates count images.

``sleep`` and ``cpu_work`` are native ops of the test-only extension
``_feedline_testing`` (tests/python/native/, ``make test-ext``): ``sleep(us)``
sleeps without the GIL (a stand-in for I/O), ``cpu_work(us)`` burns exactly
that much of the calling thread's CPU time, so its wall time grows when
threads outnumber the CPUs.

How it is measured (see the project's benchmarking notes): each pipeline
runs in its own processes (this script with ``--worker NAME --mode grid``,
then ``--mode autotune``; each prints one JSON line), after a 0.5-s warm-up
of the same pipeline at concurrency 1. The consumer loop notes, about every
0.5 s, the items delivered, the process's CPU time (``time.process_time()``,
every thread) and its own (``time.thread_time()``). The budget is the
pipeline's: the CPU of every thread but the consumer's (the pool, the
controller), which is what autotune governs; the consumer stands for the
trainer, whose CPU is not the pipeline's. Both figures are shown.

- Hand-tuned: for each point of a grid (the first pipe stage's concurrency
  in {1, 2, 4, 8, 16, 32}, the second's in {1, 2, 4}; images {1, 2, 4, 8} x
  {1, 2, 4}), a fresh pipeline with ``num_threads`` = the sum of the
  concurrencies (at most 32) and no autotune runs ``--config-seconds``
  (2 s); its rate and CPU use are those of the second half of the run.
  Then the points whose concurrencies each fit in T = ceil(the budget's
  CPUs) threads but add up to more run again with only T threads (what a
  user under a budget would try: without them no CPU-bound point could fit
  a budget under the sum of its concurrencies). The three fastest points
  within the budget are run once more and each is scored by the mean of
  its two runs (a single best of some 20 would favour a lucky run);
  "best" is the highest of these. A point is within the budget when its pipeline
  CPU-seconds per second are at most ``cpu_budget`` x the CPUs this
  process may use, plus 5%.
- Autotune: a fresh pipeline with every concurrency 1, ``num_threads=1`` and
  ``autotune=Autotune(cpu_budget=B)`` (other settings default) runs
  ``--seconds`` (10 s). Reported: the rate over the last 2 s and its ratio
  to the best hand-tuned rate; the end of the first 0.5-s window at >= 95%
  of it; the CPU used over the whole run and over the last 2 s (pipeline,
  and the whole process in brackets); the final concurrencies and active
  threads (``stats().stages[i].concurrency``, ``stats().num_threads``); the
  number of decisions; peak RSS of the worker. ``--verbose`` adds the
  0.5-s timeline (rate, knobs, CPU, and the pool CPU autotune itself saw)
  and every decision (time, knob before -> after, reason).

The runs are timed, so the source never ends: "items ok" checks that every
synthetic item is an int that has not come before (the stages map ints 1:1;
every image batch must be (32, 3, 224, 224)), that no stage failed, and that
the consumer got what the engine says it delivered. A run whose items are
wrong, or an autotuned run whose pipeline CPU over the whole run or over
its last 2 s exceeds the budget by more than 5%, makes the script exit 1; a
ratio under the goal does not.

Goals (the autotune issue): starting from concurrency 1 everywhere,
autotune reaches >= 95% of the best hand-tuned rate within 10 s on each of
the four pipelines, and stays within its CPU budget.

Run::

    python bench/python/autotune.py                  # all four, about 4 minutes
    python bench/python/autotune.py --quick          # smoke run, about 35 s
    python bench/python/autotune.py --only io,cpu --verbose
    python bench/python/autotune.py --cpu-budget 0.5 --seconds 20

``--quick`` runs 2-3 grid points (plus the thread-capped ones) for 1 s
each, none twice, the autotuned runs for 3 s and cycles 256 images; its
numbers mean nothing. Set FEEDLINE_TEST_EXT_DIR if ``_feedline_testing``
is not in build/pytest/tests/python/native.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import itertools
import json
import math
import os
import platform
import statistics
import sys
import time

from benchlib import dispatch, import_test_ext, peak_rss_kib, run_json

# -- the pipelines --------------------------------------------------------------

GRID_FIRST = (1, 2, 4, 8, 16, 32)
GRID_SECOND = (1, 2, 4)
MAX_THREADS = 32  # the grid's cap, and autotune's (max_concurrency=32)
SYNTHETIC_SINK = 16
SOURCE_ITEMS = 1 << 40  # timed runs: the source never ends
WARMUP_S = 0.5
SAMPLE_S = 0.5
GOAL = 0.95
CPU_SLACK = 1.05
CONFIRM_TOP = 3
LAST_S = 2.0  # the autotuned run's rate is the one over its last 2 s


@dataclasses.dataclass(frozen=True)
class Spec:
    name: str
    label: str
    stages: tuple[str, ...]  # the tuned (pipe) stages' names, in order
    grid: tuple[tuple[int, ...], tuple[int, ...]]
    quick_grid: tuple[tuple[int, ...], tuple[int, ...]]
    unit: str  # what the rate counts


PIPELINES = [
    Spec(
        "io",
        "sleep(5000) -> cpu_work(200)",
        ("sleep", "cpu"),
        (GRID_FIRST, GRID_SECOND),
        ((1, 8, 32), (2,)),
        "items",
    ),
    Spec(
        "cpu",
        "cpu_work(1000) -> cpu_work(500)",
        ("cpu1000", "cpu500"),
        (GRID_FIRST, GRID_SECOND),
        ((1, 2, 8), (2,)),
        "items",
    ),
    Spec(
        "mixed-py",
        "Python time.sleep(0.002) -> cpu_work(300)",
        ("py_sleep", "cpu"),
        (GRID_FIRST, GRID_SECOND),
        ((1, 8, 32), (2,)),
        "items",
    ),
    Spec(
        "images",
        "read_file -> aggregate(32) -> decode_batch(256/224, float32 CHW)",
        ("read_file", "decode_batch"),
        ((1, 2, 4, 8), (1, 2, 4)),
        ((2, 8), (2,)),
        "images",
    ),
]
BY_NAME = {s.name: s for s in PIPELINES}


def py_sleep_2ms(x):
    """The mixed-py pipeline's Python op: 2 ms asleep, the GIL released."""
    time.sleep(0.002)
    return x


def make_pipeline(name, concurrency, num_threads, args, autotune=None):
    """Builds (not starts) pipeline ``name`` with the pipe stages'
    ``concurrency``; returns (pipeline, check), where check(item) returns
    (units counted, whether the item is right)."""
    from feedline.pipeline import PipelineBuilder

    first, second = concurrency
    options = {} if autotune is None else {"autotune": autotune}
    if name == "images":
        import images

        from feedline.io import ops

        paths = images.dataset_paths(args.data, args.images)
        builder = (
            PipelineBuilder()
            .add_source(itertools.cycle(paths))
            .pipe(ops.read_file(), concurrency=first, name="read_file")
            .aggregate(images.BATCH)
            .pipe(ops.decode_batch(**images.feedline_image_options()), concurrency=second, name="decode_batch")
            .add_sink(3)
        )
        shape = (images.BATCH, 3, images.CROP, images.CROP)

        def check_batch(batch):
            got = tuple(batch.shape)
            return got[0], got == shape

        return builder.build(num_threads=num_threads, **options), check_batch

    testing = import_test_ext()
    ops_by_name = {
        "io": (testing.sleep(5000), testing.cpu_work(200)),
        "cpu": (testing.cpu_work(1000), testing.cpu_work(500)),
        "mixed-py": (py_sleep_2ms, testing.cpu_work(300)),
    }
    op1, op2 = ops_by_name[name]
    names = BY_NAME[name].stages
    builder = (
        PipelineBuilder()
        .add_source(testing.range_source(SOURCE_ITEMS))
        .pipe(op1, concurrency=first, name=names[0])
        .pipe(op2, concurrency=second, name=names[1])
        .add_sink(SYNTHETIC_SINK)
    )
    seen = set()

    def check_int(x):
        # The stages map ints 1:1, so each int comes out once at most.
        fresh = isinstance(x, int) and x not in seen
        seen.add(x)
        return 1, fresh

    return builder.build(num_threads=num_threads, **options), check_int


# -- worker side: one pipeline, grid or autotune, in its own process --------------


def _pipe_concurrency(stats):
    return [s.concurrency for s in stats.stages if s.kind == "pipe"]


def drive(pipeline, check, seconds, on_sample=None):
    """The consumer loop: drains ``pipeline`` for ``seconds``.

    Returns a dict: samples [[t, units, process CPU s, consumer CPU s], ...]
    (the first at t=0, then about every SAMPLE_S), the units counted, and
    whether every item was right and the consumer got what the engine says
    it delivered (with the reason if not). ``on_sample(pipeline)`` may
    return extra fields for each later sample.
    """
    units = bad = delivered_here = 0
    note = ""
    samples, extra = [[0.0, 0, 0.0, 0.0]], [None]  # not started yet at t=0
    final = None
    cpu0, mine0 = time.process_time(), time.thread_time()
    t0 = time.perf_counter()
    next_tick, end = t0 + SAMPLE_S, t0 + seconds
    try:
        with pipeline.auto_stop():
            for item in pipeline:
                n, ok = check(item)
                units += n
                bad += not ok
                delivered_here += 1
                now = time.perf_counter()
                if now >= next_tick:
                    cpu, mine = time.process_time() - cpu0, time.thread_time() - mine0
                    samples.append([now - t0, units, cpu, mine])
                    extra.append(on_sample(pipeline) if on_sample else None)
                    # The next tick after now (skipping any the loop missed).
                    next_tick += SAMPLE_S * (int((now - next_tick) / SAMPLE_S) + 1)
                    if now >= end:
                        final = pipeline.stats()
                        break
            else:
                note = "the pipeline ended before the run did"
    except Exception as e:  # a stage failure surfaces here (PipelineFailure)
        note = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    if final is not None and not note:
        failures = sum(s.failures for s in final.stages)
        if failures:
            note = f"{failures} stage failures"
        elif final.items_delivered != delivered_here:
            note = f"the consumer got {delivered_here} items, the engine delivered {final.items_delivered}"
    if bad and not note:
        note = f"{bad} wrong items"
    return {"samples": samples, "extra": extra, "units": units, "ok": not note, "note": note, "final": final}


@dataclasses.dataclass
class Window:
    rate: float = 0.0  # units per second
    pipeline_cpus: float = 0.0  # CPU-seconds per second of every thread but the consumer's
    process_cpus: float = 0.0  # ... of the whole process


def window(samples, start):
    """The rate and CPU use between the first sample at or after ``start``
    and the last sample."""
    first = next((s for s in samples if s[0] >= start), samples[-1])
    last = samples[-1]
    span = last[0] - first[0]
    if span <= 0:
        return Window()
    process = (last[2] - first[2]) / span
    return Window((last[1] - first[1]) / span, process - (last[3] - first[3]) / span, process)


def budget_cpus(cpu_budget):
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return cpu_budget * usable


def grid_points(spec, args):
    """(concurrency, num_threads) of each hand-tuned run: every point of the
    grid with as many threads as its calls (at most MAX_THREADS), then the
    points whose stages all fit in the threads the budget's CPUs give with
    just that many threads (a user under a budget would try those: more
    threads than CPUs only add CPU-bound calls that wait)."""
    first, second = spec.quick_grid if args.quick else spec.grid
    points = [((a, b), min(a + b, MAX_THREADS)) for a in first for b in second]
    cap = max(1, math.ceil(budget_cpus(args.cpu_budget) - 1e-9))
    points += [((a, b), cap) for a in first for b in second if a <= cap and b <= cap and a + b > cap]
    return points


def warm_up(name, args):
    # Imports, first calls and page faults before anything is timed.
    pipeline, check = make_pipeline(name, (1, 1), 2, args)
    drive(pipeline, check, WARMUP_S)


def run_config(name, concurrency, threads, args):
    pipeline, check = make_pipeline(name, concurrency, threads, args)
    run = drive(pipeline, check, args.config_seconds)
    w = window(run["samples"], args.config_seconds / 2)
    result = {"concurrency": list(concurrency), "threads": threads, "ok": run["ok"]} | dataclasses.asdict(w)
    if run["note"]:
        result["note"] = run["note"]
    return result


def grid_main(name, args):
    warm_up(name, args)
    configs = [run_config(name, c, t, args) for c, t in grid_points(BY_NAME[name], args)]
    limit = budget_cpus(args.cpu_budget) * CPU_SLACK
    within = [c for c in configs if c["ok"] and c["pipeline_cpus"] <= limit]
    top = sorted(within, key=lambda c: -c["rate"])[: 0 if args.quick else CONFIRM_TOP]
    confirmed = [run_config(name, tuple(c["concurrency"]), c["threads"], args) for c in top]
    return {"configs": configs, "confirmed": confirmed, "budget_cpus": budget_cpus(args.cpu_budget)}


def autotune_main(name, args):
    from feedline.pipeline import Autotune

    warm_up(name, args)

    def on_sample(pipeline):
        s = pipeline.stats()
        return [_pipe_concurrency(s), s.num_threads, s.autotune.cpu_used]

    pipeline, check = make_pipeline(name, (1, 1), 1, args, autotune=Autotune(cpu_budget=args.cpu_budget))
    run = drive(pipeline, check, args.seconds, on_sample)
    final = run.pop("final")
    report = dict(run, budget_cpus=budget_cpus(args.cpu_budget))
    if final is not None:
        at = final.autotune
        report["enabled"] = at.enabled
        report["engine_budget_cpus"] = at.cpu_budget
        report["concurrency"] = _pipe_concurrency(final)
        report["threads"] = final.num_threads
        report["decisions_total"] = at.decisions_total
        report["decisions"] = [[d.at, d.stage, d.target, d.before, d.after, d.reason] for d in at.decisions]
    return report


def worker_main(name, args):
    """Runs one pipeline's grid or autotuned run; prints one JSON line."""
    report = grid_main(name, args) if args.mode == "grid" else autotune_main(name, args)
    report["peak_rss_kib"] = peak_rss_kib()
    print(json.dumps(report))


# -- parent side: workers, tables, summary ----------------------------------------


@dataclasses.dataclass
class Outcome:
    spec: Spec
    best: dict | None = None  # the best hand-tuned configuration
    run: Window | None = None  # autotuned, over the whole run
    last: Window | None = None  # autotuned, over the last LAST_S
    ratio: float | None = None  # last.rate / best rate
    over_budget: bool = False
    notes: list[str] = dataclasses.field(default_factory=list)  # what went wrong


def _worker(name, mode, args):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", name, "--mode", mode]
    cmd += ["--cpu-budget", str(args.cpu_budget), "--seconds", str(args.seconds)]
    cmd += ["--config-seconds", str(args.config_seconds), "--images", str(args.images), "--data", str(args.data)]
    if args.quick:
        cmd.append("--quick")
    return run_json(cmd, args.timeout, f"{name} {mode}")


def _fmt_rate(x):
    return "-" if x is None else f"{x:,.0f}"


def _conc(c):
    return "/".join(str(x) for x in c)


def _key(config):
    return tuple(config["concurrency"]), config["threads"]


def _print_rows(header, rows):
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(cells):
        return "  ".join([str(cells[0]).ljust(widths[0]), *(str(c).rjust(w) for c, w in zip(cells[1:], widths[1:]))])

    print("  " + line(header))
    print("  " + "  ".join("-" * w for w in widths))
    for r in rows:
        print("  " + line(r))


def pick_best(grid, limit):
    """The best configuration within the CPU limit: the highest mean of the
    confirmed runs (or of the single run where none were repeated)."""
    runs = {}
    for c in grid["configs"] + grid["confirmed"]:
        runs.setdefault(_key(c), []).append(c)
    candidates = []
    for (concurrency, threads), rs in runs.items():
        if not all(r["ok"] for r in rs) or (grid["confirmed"] and len(rs) < 2):
            continue  # where some were run again, only those compete
        mean = {k: statistics.mean(r[k] for r in rs) for k in ("rate", "pipeline_cpus", "process_cpus")}
        if mean["pipeline_cpus"] <= limit:
            candidates.append({"concurrency": list(concurrency), "threads": threads, **mean})
    return max(candidates, key=lambda c: c["rate"], default=None)


def print_grid(spec, grid, best, limit):
    print(
        f"  hand-tuned grid ({spec.unit}/s and CPUs over the second half of each run; "
        f"in budget: pipeline CPUs <= {limit:.2f}):"
    )
    again = {_key(c): c for c in grid["confirmed"]}
    rows = []
    for c in grid["configs"]:
        status = "yes" if c["pipeline_cpus"] <= limit else "NO"
        if not c["ok"]:
            status = f"items NOT ok: {c.get('note', '')}"
        mark = " *" if best and _key(best) == _key(c) else ""
        rows.append(
            (
                _conc(c["concurrency"]) + mark,
                c["threads"],
                _fmt_rate(c["rate"]),
                _fmt_rate(again[_key(c)]["rate"]) if _key(c) in again else "-",
                f"{c['pipeline_cpus']:.2f}",
                f"{c['process_cpus']:.2f}",
                status,
            )
        )
    header = (
        " / ".join(spec.stages),
        "threads",
        f"{spec.unit}/s",
        "again",
        "CPUs pipeline",
        "CPUs process",
        "in budget",
    )
    _print_rows(header, rows)
    if best is None:
        print("  best hand-tuned: none within the budget")
    else:
        print(
            f"  best hand-tuned (*): {_conc(best['concurrency'])}, {best['threads']} threads: "
            f"{_fmt_rate(best['rate'])} {spec.unit}/s, {best['pipeline_cpus']:.2f} CPUs pipeline, "
            f"{best['process_cpus']:.2f} process"
        )


def _windows(samples):
    """(end time, rate) of each sampling window."""
    return [(b[0], (b[1] - a[1]) / (b[0] - a[0])) for a, b in zip(samples, samples[1:]) if b[0] > a[0]]


def print_autotune(outcome, report, args):
    spec = outcome.spec
    samples = report["samples"]
    seconds = samples[-1][0]
    outcome.run, outcome.last = window(samples, 0.0), window(samples, seconds - LAST_S)
    best = outcome.best["rate"] if outcome.best else None
    outcome.ratio = outcome.last.rate / best if best else None
    reached = next((t for t, r in _windows(samples) if best and r >= GOAL * best), None)
    limit = report["budget_cpus"] * CPU_SLACK
    outcome.over_budget = max(outcome.run.pipeline_cpus, outcome.last.pipeline_cpus) > limit
    if not report["ok"]:
        outcome.notes.append(f"autotune run: {report['note']}")
    if not report.get("enabled", False):
        outcome.notes.append("autotune run: autotune is not enabled in the run's statistics")
    print(f"  autotune (from {_conc([1] * len(spec.stages))} and 1 thread, {seconds:.1f} s):")
    header = (
        f"{spec.unit}/s last {LAST_S:g} s",
        "vs best",
        f">= {GOAL:.0%} at",
        "CPUs run",
        f"CPUs last {LAST_S:g} s",
        "final conc",
        "threads",
        "decisions",
        "peak RSS MiB",
        "items ok",
    )
    over = " OVER" if outcome.over_budget else ""
    row = (
        _fmt_rate(outcome.last.rate),
        "n/a" if outcome.ratio is None else f"{outcome.ratio:.2f}",
        "never" if reached is None else f"{reached:.1f} s",
        f"{outcome.run.pipeline_cpus:.2f} ({outcome.run.process_cpus:.2f})",
        f"{outcome.last.pipeline_cpus:.2f} ({outcome.last.process_cpus:.2f}){over}",
        _conc(report.get("concurrency", [])) or "-",
        report.get("threads", "-"),
        report.get("decisions_total", "-"),
        f"{report['peak_rss_kib'] / 1024:.0f}",
        "yes" if report["ok"] else f"NO: {report['note']}",
    )
    _print_rows(header, [row])
    print("  (CPUs: pipeline, i.e. every thread but the consumer's, and in brackets the whole process)")
    engine_budget = report.get("engine_budget_cpus")
    if engine_budget is not None and abs(engine_budget - report["budget_cpus"]) > 1e-6:
        print(f"  note: the engine's budget is {engine_budget:.2f} CPUs, this script's {report['budget_cpus']:.2f}")
    if best:
        ratios = " ".join(f"{r / best:.2f}" for _, r in _windows(samples))
        print(f"  each {SAMPLE_S:g} s, vs best: {ratios}")
    if args.verbose:
        print_timeline(report, best)
        print_decisions(report)


def print_timeline(report, best):
    print(
        "  timeline (window end, rate, vs best, concurrency, active threads, pipeline CPUs, "
        "pool CPUs as autotune saw them):"
    )
    samples, extra = report["samples"], report["extra"]
    for i, (t, rate) in enumerate(_windows(samples), start=1):
        conc, threads, pool = extra[i] if extra[i] else ([], "-", 0.0)
        w = window(samples[i - 1 : i + 1], 0.0)
        vs = f"{rate / best:.2f}" if best else "n/a"
        print(
            f"    {t:5.1f} s  {rate:>9,.0f}  {vs:>5}  {_conc(conc):>8}  {threads:>3}  {w.pipeline_cpus:.2f}  {pool:.2f}"
        )


def print_decisions(report):
    decisions = report.get("decisions", [])
    total = report.get("decisions_total", 0)
    print(f"  decisions ({total}" + (f", the latest {len(decisions)} listed" if total > len(decisions) else "") + "):")
    for at, _stage, target, before, after, reason in decisions:
        print(f"    {at:6.2f} s  {target}: {before} -> {after}  ({reason})")


def run_pipeline(spec, args):
    print(f"\n{spec.name}: {spec.label}", flush=True)
    outcome = Outcome(spec)
    grid, note = _worker(spec.name, "grid", args)
    if grid is None:
        outcome.notes.append(f"grid: {note}")
        print(f"  hand-tuned grid failed: {note}")
    else:
        limit = grid["budget_cpus"] * CPU_SLACK
        bad = [c for c in grid["configs"] + grid["confirmed"] if not c["ok"]]
        if bad:
            outcome.notes.append(f"grid {_conc(bad[0]['concurrency'])}: {bad[0].get('note', '')}")
        outcome.best = pick_best(grid, limit)
        print_grid(spec, grid, outcome.best, limit)
    report, note = _worker(spec.name, "autotune", args)
    if report is None:
        outcome.notes.append(f"autotune: {note}")
        print(f"  autotune run failed: {note}")
    else:
        print_autotune(outcome, report, args)
    return outcome


def _version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def print_header(args, names):
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print("Autotune against hand-tuned concurrency: rate reached, how soon, CPU used")
    print(f"Python {platform.python_version()}, feedline {_version('feedline')}")
    print(f"CPUs: {os.cpu_count()} ({usable} usable), load average at start: {load}")
    print(
        f"CPU budget: {args.cpu_budget} x {usable} = {args.cpu_budget * usable:.2f} CPUs (+{CPU_SLACK - 1:.0%} slack), "
        "for the pipeline's threads: CPU-seconds per second of the process less the consumer's thread"
    )
    print(
        f"Hand-tuned: each grid point {args.config_seconds:g} s, num_threads = sum of concurrencies (<= "
        f"{MAX_THREADS}) or the budget's CPUs, rate over the second half"
        + ("" if args.quick else f"; the {CONFIRM_TOP} best in budget run again, scored by the mean")
    )
    print(f"Autotune: from concurrency 1 and 1 thread, {args.seconds:g} s, rate over the last {LAST_S:g} s")
    print(f"Pipelines: {', '.join(names)}; each mode of each in its own process, after a {WARMUP_S} s warm-up")
    if args.quick:
        print("--quick: smoke run only; do not read the numbers.")


def summary(outcomes, args):
    names = "/".join(o.spec.name for o in outcomes)
    ratios = "/".join("n/a" if o.ratio is None else f"{o.ratio:.2f}" for o in outcomes)
    in_budget = all(o.run is not None and not o.over_budget for o in outcomes)
    goal = all(o.ratio is not None and o.ratio >= GOAL for o in outcomes) and in_budget
    line = (
        f"summary: autotune reached {ratios} of hand-tuned ({names}) within {args.seconds:g} s; "
        f"CPU within budget: {'yes' if in_budget else 'NO'}; "
        f"goal (>= {GOAL:.2f} on each, within budget): {'met' if goal else 'NOT met'}"
    )
    if args.quick:
        line += " (smoke run)"
    return line


def parent_main(args):
    names = [s.name for s in PIPELINES] if not args.only else args.only.split(",")
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        sys.exit(f"unknown pipeline(s) {', '.join(unknown)}; choose from {', '.join(BY_NAME)}")
    print_header(args, names)
    if "images" in names:
        import images

        paths = images.ensure_dataset(args.data, args.images)
        print(f"Images: {images.describe_dataset(paths)}, cycled")  # also reads them into the page cache
    outcomes = [run_pipeline(BY_NAME[name], args) for name in names]
    failed = False
    for o in outcomes:
        for note in o.notes:
            print(f"{o.spec.name}: {note}")
        failed |= bool(o.notes) or o.over_budget
    print()
    print(summary(outcomes, args))
    return 1 if failed else 0


def parse_args(argv):
    import images

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cpu-budget", type=float, default=1.0, help="autotune's cpu_budget, a share of the CPUs")
    p.add_argument("--seconds", type=float, default=10.0, help="length of the autotuned run")
    p.add_argument("--config-seconds", type=float, default=2.0, help="length of each hand-tuned run")
    p.add_argument("--only", help=f"comma-separated pipelines out of {','.join(BY_NAME)}")
    p.add_argument("--quick", action="store_true", help="smoke run: 3 grid points, short runs")
    p.add_argument("--verbose", action="store_true", help="print autotune's decisions and timeline")
    p.add_argument("--images", type=int, default=2000, help="distinct images the image pipeline cycles over")
    p.add_argument("--data", default=str(images.DEFAULT_DATA), help="image folder (made if missing)")
    p.add_argument("--timeout", type=float, default=600, help="seconds before a worker is given up on")
    # Internal: run one pipeline's grid or autotuned run in this process.
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--mode", choices=("grid", "autotune"), default="grid", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick and not args.worker:
        args.seconds, args.config_seconds, args.images = 3.0, 1.0, 256
    if not 0 < args.cpu_budget <= 1:
        p.error("--cpu-budget must be in (0, 1]")
    # Samples come every SAMPLE_S: each run needs a window in its measured part.
    if args.seconds < LAST_S + SAMPLE_S or args.config_seconds < 2 * SAMPLE_S:
        p.error(f"--seconds must be at least {LAST_S + SAMPLE_S:g}, --config-seconds at least {2 * SAMPLE_S:g}")
    return args


def main(argv=None):
    return dispatch(parse_args(argv), worker_main, parent_main)


if __name__ == "__main__":
    sys.exit(main())
