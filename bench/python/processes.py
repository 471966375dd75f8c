# SPDX-License-Identifier: Apache-2.0
"""Python code past the GIL: regions and subprocess runners against threads
and the PyTorch DataLoader.

Two measurements, every contender in its own process, ``--rounds`` times
(default 3) alternating; the tables give medians:

1. **A GIL-bound stage.** ``--items`` items (default 1,500) through a
   pure-Python function of about 2 ms per item (a loop calibrated on this
   machine), batched by 32, with 2 threads or 2 processes:

   - ``threads``: ``PipelineBuilder().add_source(range(n)).pipe(work,
     concurrency=2).aggregate(32)``, ``num_threads=2``: one process, the GIL
     serialises the work;
   - ``region``: the same stages between ``.to(ProcessPoolExecutorConfig(
     max_workers=2))`` and ``.to(MAIN_PROCESS)``;
   - ``subprocess``: the ``threads`` pipeline in ``run_pipeline_in_subprocess``
     (one worker process: the GIL still serialises the work there);
   - ``torch``: ``DataLoader(dataset, batch_size=32, num_workers=2)`` (fork,
     torch's default on Linux) over a map-style dataset whose
     ``__getitem__`` does the same work.

   Reported: items/s after the first batch, time to first batch, CPU
   seconds per item over the whole run (the worker, its waited-for children
   and, read from /proc before they exit, its other descendants: the
   forkserver's workers) and peak RSS (the worker plus its largest waited-for
   child; the forkserver's workers are not in it).

2. **Time to first batch over a 1M-entry in-memory dataset** (the IPC case
   of a large dataset object): a list of 1,000,000 small records, a light
   per-item function, batches of 32, 2 processes:

   - ``region-1m``: the list is the source of a pipeline whose stages run in
     a 2-process region: only the items cross;
   - ``torch-1m``: ``DataLoader(num_workers=2, multiprocessing_context=
     "spawn")``: each worker gets the dataset pickled.

Goals (issue 15): region >= 1.8x threads and >= 1.2x torch on the GIL-bound
stage; region-1m time to first batch <= 0.2x torch-1m's.

The shared-memory hand-off (arrays of 1-16 MiB from a worker process) is
measured by ``bench/python/arena_handoff.py``.

Run::

    python bench/python/processes.py           # ~1 min on 2 cores
    python bench/python/processes.py --quick   # smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from benchlib import cpu_seconds, dispatch, peak_rss_kib, run_json

BATCH = 32
WORKERS = 2
GIL_BOUND = ["threads", "region", "subprocess", "torch"]
BIG = ["region-1m", "torch-1m"]


# -- the work (module level: worker processes import it from here) -------------------


# Set by the parent after calibrating; the workers inherit it.
LOOPS = int(os.environ.get("FEEDLINE_BENCH_LOOPS", "20000"))


def work(x, loops=LOOPS):
    """Pure-Python arithmetic: holds the GIL throughout."""
    acc = x
    for i in range(loops):
        acc = (acc * 31 + i) % 1000003
    return acc


def light(record):
    return record["id"] * 2 + len(record["name"])


class WorkDataset:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return work(i)


class RecordDataset:
    def __init__(self, records):
        self.records = records

    def __len__(self):
        return len(self.records)

    def __getitem__(self, i):
        return light(self.records[i])


def records(n):
    return [{"id": i, "name": f"sample-{i:07d}"} for i in range(n)]


# -- one contender in this process -----------------------------------------------------


def _feedline_loader(name, n):
    """``n``: the item count, or the records for the 1M-entry contender."""
    from feedline.pipeline import PipelineBuilder, run_pipeline_in_subprocess
    from feedline.pipeline.defs import MAIN_PROCESS, ProcessPoolExecutorConfig

    if name == "region-1m":
        builder = PipelineBuilder().add_source(n).to(ProcessPoolExecutorConfig(max_workers=WORKERS))
        return _run(builder.pipe(light).aggregate(BATCH).to(MAIN_PROCESS).add_sink(3))
    builder = PipelineBuilder().add_source(range(n))
    if name == "region":
        builder = (
            builder.to(ProcessPoolExecutorConfig(max_workers=WORKERS)).pipe(work).aggregate(BATCH).to(MAIN_PROCESS)
        )
    else:
        builder = builder.pipe(work, concurrency=WORKERS).aggregate(BATCH)
    builder = builder.add_sink(3)
    if name == "subprocess":
        return iter(run_pipeline_in_subprocess(builder.get_config(), num_threads=WORKERS))
    return _run(builder)


def _run(builder):
    pipeline = builder.build(num_threads=WORKERS)
    pipeline.start()
    return iter(pipeline)


def _torch_loader(name, n):
    from torch.utils.data import DataLoader

    if name == "torch-1m":
        dataset = RecordDataset(n)
        return iter(DataLoader(dataset, batch_size=BATCH, num_workers=WORKERS, multiprocessing_context="spawn"))
    return iter(DataLoader(WorkDataset(n), batch_size=BATCH, num_workers=WORKERS))


class DescendantCpu:
    """user+sys seconds of this process's descendants that it does not wait
    for (the forkserver's workers: RUSAGE_CHILDREN never sees them), read
    from /proc every 50 ms while they live; the last reading of each
    counts."""

    def __init__(self):
        import threading

        self.seen: dict = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(0.05):
            self.sample()

    def sample(self):
        tick = os.sysconf("SC_CLK_TCK")
        parents, cpu = {}, {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                parents[int(entry)] = int(fields[1])
                cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
        me = os.getpid()
        for pid, seconds in cpu.items():
            p = parents.get(pid)
            while p not in (None, 0, 1, me):
                p = parents.get(p)
            # Children of this process are counted by RUSAGE_CHILDREN once waited for.
            if p == me and parents.get(pid) != me:
                self.seen[pid] = seconds

    def total(self):
        self._stop.set()
        self._thread.join()
        self.sample()
        return sum(self.seen.values())


def worker_main(name, args):
    import feedline.pipeline  # noqa: F401 - imports before any timing

    try:
        import torch  # noqa: F401
    except ImportError as e:
        if name.startswith("torch"):
            print(json.dumps({"unavailable": f"{e.name or e} not installed"}))
            return
    n = 1_000_000 if name in BIG else args.items
    data = records(n) if name in BIG else n  # the dataset exists before the loader
    cpu0 = cpu_seconds()
    others = DescendantCpu()
    t0 = time.perf_counter()
    it = _torch_loader(name, data) if name.startswith("torch") else _feedline_loader(name, data)
    count = len(next(it))
    t1 = time.perf_counter()
    report = {"ttfb_s": t1 - t0}
    if name not in BIG:
        for batch in it:
            count += len(batch)
        if count != n:
            print(json.dumps({"unavailable": f"delivered {count} of {n} items"}))
            return
        t2 = time.perf_counter()
        report.update(items=count, steady_items=count - BATCH, steady_s=t2 - t1)
    del it
    report.update(cpu_s=cpu_seconds() - cpu0 + others.total(), peak_rss_kib=peak_rss_kib())
    print(json.dumps(report))
    sys.stdout.flush()
    os._exit(0)  # the loaders' workers are stopped by their finalizers; do not wait on the 1M list's teardown


# -- parent ------------------------------------------------------------------------


def calibrate(ms=2.0):
    """Loop count for ``work`` to take about ``ms`` milliseconds here."""
    # The median of 31 runs (about 40 ms in all): one short run, slowed by a
    # cold cache or another tenant of the VM, made the items half as long as
    # asked for in some runs.
    loops = 20000
    times = []
    for _ in range(31):
        t0 = time.perf_counter()
        work(1, loops)
        times.append(time.perf_counter() - t0)
    return max(1000, int(loops * ms / 1000 / statistics.median(times)))


def median(reports, fn):
    good = [r for r in reports if "unavailable" not in r]
    return statistics.median(fn(r) for r in good) if good and len(good) == len(reports) else None


def ratio(x, base):
    return "n/a" if x is None or base is None else f"{x / base:.2f}x"


def main_parent(args):
    loops = calibrate()
    os.environ["FEEDLINE_BENCH_LOOPS"] = str(loops)
    names = [n for n in GIL_BOUND + BIG if not args.only or n in args.only.split(",")]
    reports: dict = {n: [] for n in names}
    print(f"work(): {loops} loop turns, about 2 ms per item; {args.items} items; {args.rounds} round(s)")
    print(f"CPUs: {os.cpu_count()}, load average at start: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for _ in range(args.rounds):
        for name in names:
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", name, "--items", str(args.items)]
            report, note = run_json(cmd, args.timeout, name)
            reports[name].append(report if report is not None else {"unavailable": note})

    def rate(name):
        return median(reports.get(name, [{"unavailable": ""}]), lambda r: r["steady_items"] / r["steady_s"])

    def ttfb(name):
        return median(reports.get(name, [{"unavailable": ""}]), lambda r: r["ttfb_s"])

    print()
    print(
        f"{'GIL-bound stage':22} {'items/s':>9} {'vs threads':>11} {'vs torch':>9} {'1st batch s':>12}"
        f" {'CPU ms/item':>12} {'RSS MiB':>8}"
    )
    for name in [n for n in GIL_BOUND if n in names]:
        r = rate(name)
        cpu = median(reports[name], lambda r: r["cpu_s"] / r["items"])
        rss = median(reports[name], lambda r: r["peak_rss_kib"] / 1024)
        print(
            f"{name:22} {r or 0:9,.0f} {ratio(r, rate('threads')):>11} {ratio(r, rate('torch')):>9}"
            f" {ttfb(name) or 0:12.3f} {(cpu or 0) * 1e3:12.2f} {rss or 0:8.0f}"
        )
    print()
    print(f"{'1M-entry dataset':22} {'1st batch s':>12} {'vs torch':>9} {'CPU s':>7} {'RSS MiB':>8}")
    for name in [n for n in BIG if n in names]:
        cpu = median(reports[name], lambda r: r["cpu_s"])
        rss = median(reports[name], lambda r: r["peak_rss_kib"] / 1024)
        print(
            f"{name:22} {ttfb(name) or 0:12.3f} {ratio(ttfb(name), ttfb('torch-1m')):>9} {cpu or 0:7.2f} {rss or 0:8.0f}"
        )

    # The threads contender runs every item's work under one GIL: one core's
    # worth. With WORKERS processes (and at least as many cores) no contender
    # can beat WORKERS times it, so the goals are also given as shares of
    # that bound.
    one_core, region, torch = rate("threads"), rate("region"), rate("torch")
    if one_core and region and torch:
        bound = min(WORKERS, os.cpu_count() or 1) * one_core
        print(
            f"\nbound ({WORKERS} workers x threads' rate): {bound:,.0f} items/s; region runs at {region / bound:.0%}"
            f" of it, torch at {torch / bound:.0%}; 1.2x torch would be {1.2 * torch / bound:.0%} of it"
        )

    goals = []
    for label, value, base, want, higher in [
        ("region vs threads", rate("region"), rate("threads"), 1.8, True),
        ("region vs torch", rate("region"), rate("torch"), 1.2, True),
        ("region-1m first batch vs torch-1m", ttfb("region-1m"), ttfb("torch-1m"), 0.2, False),
    ]:
        if value is None or base is None:
            goals.append(f"{label} n/a")
            continue
        r = value / base
        met = r >= want if higher else r <= want
        goals.append(f"{label} {r:.2f}x (goal {'>=' if higher else '<='} {want}x{'' if met else ', NOT met'})")
    print()
    print("SUMMARY: " + "; ".join(goals))
    # A feedline contender that failed or lost items is an error (torch may be missing).
    failed = [n for n in names if not n.startswith("torch") and any("unavailable" in r for r in reports[n])]
    for name in failed:
        print(f"{name}: " + "; ".join(r["unavailable"] for r in reports[name] if "unavailable" in r))
    return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--items", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated contenders")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.items, args.rounds = 128, 1
    return dispatch(args, worker_main, main_parent)


if __name__ == "__main__":
    sys.exit(main())
