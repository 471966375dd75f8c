# SPDX-License-Identifier: Apache-2.0
"""Training-loop loaders: feedline.dataloader against the PyTorch DataLoader.

What is measured, on a 10,000-item image dataset (small JPEGs made by the
``ffmpeg`` CLI from its ``testsrc2`` pattern, 320x240, quality about 90) and
the same work for every contender: decode, resize the shorter side to 128
(bilinear) and centre-crop 112x112, uint8 HWC, batches of 32 handed to the
training loop as torch tensors, with 2 threads or 2 worker processes:

- time to first batch: from constructing the loader to holding the first
  batch (imports done before), what every job start and, for loaders that
  are rebuilt, every epoch pays;
- steady images/s: the rate after the first batch, over ``--steady``
  images (default 3,000); and the CPU those images cost (the loader
  process's threads and, for the DataLoader, its live worker processes, from
  /proc), which gives the rate 2 idle cores would allow ("2-core capacity"):
  on a shared machine the wall rate moves with other load, the CPU cost
  much less;
- CPU-seconds per image over the whole run (user+sys of the worker and its
  waited-for children, start-up included) and peak RSS (worker + largest
  child);
- for feedline: ``state_dict()`` cost (mean over 20,000 calls, mid-epoch)
  and its size (pickled bytes).

Every contender runs ``--rounds`` times (default 3), in its own process
each time, alternating with the others; the tables give medians.

Contenders:

- ``torch``: ``torch.utils.data.DataLoader(dataset, batch_size=32,
  num_workers=2, multiprocessing_context="spawn")`` over a map-style dataset
  whose ``__getitem__`` runs Pillow (``Image.open().convert("RGB")``,
  ``resize`` bilinear, ``crop``) and returns ``torch.from_numpy``.
- ``feedline``: ``feedline.dataloader.DataLoader(paths,
  preprocessor=ops.read_file(), batch_size=32, aggregator=ops.decode_batch(
  resize_shorter=128, crop=112, layout="HWC", dtype="uint8"),
  num_threads=2)``: native ops, each batch decoded straight into one Buffer
  (libjpeg-turbo decodes only the rows and columns the crop keeps, and at a
  reduced DCT scale where the size allows, see docs/images.md), handed over
  with ``feedline.io.to_torch``.
- ``feedline-full-decode``: the same with ``dct_scaling=False``: every JPEG
  decoded at full size before the resize, as Pillow does.
- ``adapter-pillow``: the one-line migration: the same Pillow dataset in
  ``feedline.dataloader.PyTorchDataLoader(dataset, batch_size=32,
  num_workers=2)`` (2 threads, torch's default collate).
- ``adapter-feedline-io``: the adapter over a dataset whose ``__getitem__``
  calls ``feedline.io.load_image`` (GIL released while decoding).

Goals (issue 14), for ``feedline``: time to first batch <= 0.1x the
DataLoader's, steady images/s >= 3x, ``state_dict()`` <= 10 us and
<= 1 KiB.

Run::

    python bench/python/dataloader.py            # ~2 min on 2 cores
    python bench/python/dataloader.py --quick    # smoke run
    python bench/python/dataloader.py --only feedline,torch
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import pickle
import platform
import shutil
import statistics
import subprocess
import sys
import time
import timeit

from benchlib import cpu_seconds, dispatch, peak_rss_kib, run_json

REPO = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_DATA = REPO / "build" / "dataloader-bench-data"
WIDTH, HEIGHT = 320, 240
BATCH = 32
NUM_THREADS = 2
SHORTER = 128
CROP = 112


@dataclasses.dataclass(frozen=True)
class Contender:
    name: str
    label: str


CONTENDERS = [
    Contender("feedline", "feedline DataLoader, native ops"),
    Contender("feedline-full-decode", "feedline DataLoader, native ops, full-size decode"),
    Contender("adapter-feedline-io", "feedline PyTorchDataLoader, feedline.io dataset"),
    Contender("adapter-pillow", "feedline PyTorchDataLoader, Pillow dataset (1-line port)"),
    Contender("torch", "PyTorch DataLoader, 2 workers (spawn), Pillow"),
]
BY_NAME = {c.name: c for c in CONTENDERS}


# -- datasets (module level: the spawned workers import them from here) ----------


def pillow_transform(path):
    import numpy as np
    from PIL import Image

    with Image.open(path) as img:
        img = img.convert("RGB")
    w, h = img.size
    size = (SHORTER, int(SHORTER * h / w)) if w <= h else (int(SHORTER * w / h), SHORTER)
    img = img.resize(size, Image.BILINEAR)
    left, top = int(round((size[0] - CROP) / 2)), int(round((size[1] - CROP) / 2))
    return np.asarray(img.crop((left, top, left + CROP, top + CROP)))


class PillowImages:
    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        import torch

        return torch.from_numpy(pillow_transform(self.paths[i]))


class FeedlineImages(PillowImages):
    def __getitem__(self, i):
        import feedline.io

        image = feedline.io.load_image(self.paths[i], resize_shorter=SHORTER, crop=CROP)
        return feedline.io.to_torch(image)


def make_loader(name, paths):
    if name == "torch":
        from torch.utils.data import DataLoader

        return DataLoader(
            PillowImages(paths), batch_size=BATCH, num_workers=NUM_THREADS, multiprocessing_context="spawn"
        )
    from feedline.dataloader import DataLoader, PyTorchDataLoader

    if name in ("feedline", "feedline-full-decode"):
        from feedline.io import ops

        decode = ops.decode_batch(
            resize_shorter=SHORTER, crop=CROP, layout="HWC", dtype="uint8", dct_scaling=name == "feedline"
        )
        return DataLoader(
            paths,
            preprocessor=ops.read_file(),
            batch_size=BATCH,
            aggregator=decode,
            num_threads=NUM_THREADS,
            buffer_size=3,
        )
    dataset = PillowImages(paths) if name == "adapter-pillow" else FeedlineImages(paths)
    return PyTorchDataLoader(dataset, batch_size=BATCH, num_workers=NUM_THREADS, in_order=False)


# -- worker: one contender in this process ----------------------------------------


def _as_tensor(batch):
    try:
        import torch
    except ImportError:  # the feedline contender runs without torch: keep the Buffer
        return batch
    if isinstance(batch, torch.Tensor):
        return batch
    from feedline.io import to_torch

    return to_torch(batch)


def _process_cpu(pids):
    """CPU seconds (user+sys) of this process's threads and of the live
    processes ``pids``, read while they run (/proc/PID/stat, in clock ticks)."""
    total = time.process_time()
    tick = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def _state_cost(loader):
    """Mean seconds per state_dict() call and the pickled size, mid-epoch."""
    calls = 20000
    seconds = min(timeit.repeat(loader.state_dict, number=calls, repeat=3)) / calls
    return seconds, len(pickle.dumps(loader.state_dict()))


def worker_main(name, args):
    # Imports before any timing (the feedline contender needs neither torch
    # nor Pillow, but a training loop would have torch loaded).
    import feedline.dataloader  # noqa: F401
    import feedline.io  # noqa: F401

    try:
        import torch  # noqa: F401

        if not name.startswith("feedline"):
            import PIL.Image  # noqa: F401
    except ImportError as e:
        if name.startswith("feedline") and e.name == "torch":
            pass
        else:
            print(json.dumps({"unavailable": f"{e.name or e} not installed"}))
            return
    paths = dataset_paths(args.data, args.images)
    cpu0 = cpu_seconds()
    t0 = time.perf_counter()
    loader = make_loader(name, paths)
    it = iter(loader)
    first = _as_tensor(next(it))
    t1 = time.perf_counter()
    # torch's worker processes (a private attribute of its iterator; none for feedline).
    pids = [w.pid for w in getattr(it, "_workers", [])]
    steady_cpu0 = _process_cpu(pids)
    count, bad = first.shape[0], int(tuple(first.shape[1:]) != (CROP, CROP, 3))
    while count < BATCH + args.steady:
        batch = _as_tensor(next(it))
        bad += int(tuple(batch.shape[1:]) != (CROP, CROP, 3))
        count += batch.shape[0]
    t2 = time.perf_counter()
    steady_cpu = _process_cpu(pids) - steady_cpu0
    report = {"ttfb_s": t1 - t0, "steady_images": count - first.shape[0], "steady_s": t2 - t1, "count": count}
    report["steady_cpu_s"] = steady_cpu
    if name != "torch":
        report["state_s"], report["state_bytes"] = _state_cost(loader)
        loader.close()
    del it, loader  # torch: shuts the workers down (waited for, so their CPU counts)
    report.update(cpu_s=cpu_seconds() - cpu0, bad_batches=bad, peak_rss_kib=peak_rss_kib())
    print(json.dumps(report))


# -- parent ---------------------------------------------------------------------


def dataset_paths(data, n):
    return [str(pathlib.Path(data) / f"{i:06d}.jpg") for i in range(n)]


def ensure_dataset(data, n):
    paths = dataset_paths(data, n)
    if all(os.path.exists(p) for p in paths):
        return paths
    if not shutil.which("ffmpeg"):
        sys.exit("the dataset is made with the ffmpeg CLI, which is not on PATH")
    pathlib.Path(data).mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi"]
        + ["-i", f"testsrc2=size={WIDTH}x{HEIGHT}:rate=25", "-frames:v", str(n)]
        + ["-q:v", "3", "-start_number", "0", str(pathlib.Path(data) / "%06d.jpg")],
        check=True,
    )
    return paths


@dataclasses.dataclass
class Result:
    """A contender's reports, one per round."""

    contender: Contender
    reports: list = dataclasses.field(default_factory=list)
    note: str = ""

    @property
    def ok(self):
        good = [r for r in self.reports if "unavailable" not in r and not r.get("bad_batches")]
        return bool(self.reports) and len(good) == len(self.reports)

    def median(self, fn):
        return statistics.median(fn(r) for r in self.reports) if self.ok else None

    def rate(self):
        return self.median(lambda r: r["steady_images"] / r["steady_s"])

    def rates(self):
        return sorted(r["steady_images"] / r["steady_s"] for r in self.reports)

    def ttfb(self):
        return self.median(lambda r: r["ttfb_s"])

    def steady_cpu(self):
        """CPU seconds per image while steady."""
        return self.median(lambda r: r["steady_cpu_s"] / r["steady_images"])

    def capacity(self):
        """Images/s the steady CPU cost allows on NUM_THREADS idle cores."""
        cpu = self.steady_cpu()
        return None if cpu is None else NUM_THREADS / cpu

    def total_cpu(self):
        return self.median(lambda r: r["cpu_s"] / r["count"])


def run_contender(contender, args, result):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", contender.name]
    cmd += ["--images", str(args.images), "--steady", str(args.steady), "--data", str(args.data)]
    report, note = run_json(cmd, args.timeout, contender.name)
    if report is None:
        result.note = note
        result.reports.append({"unavailable": note})
    elif "unavailable" in report:
        result.note = report["unavailable"]
        result.reports.append(report)
    else:
        result.reports.append(report)


def _ratio(x, base):
    return "n/a" if x is None or base is None else f"{x / base:.2f}x"


def print_table(results):
    base = next((r for r in results if r.contender.name == "torch" and r.ok), None)

    def vs(value, attr):
        return _ratio(value, getattr(base, attr)() if base else None)

    header = (
        "contender",
        "1st batch s",
        "vs torch",
        "images/s (min-max)",
        "vs torch",
        "steady CPU ms/img",
        "2-core capacity/s",
        "vs torch",
        "CPU ms/img (all)",
        "RSS MiB",
    )
    rows = []
    for r in results:
        if not r.ok:
            rows.append((r.contender.label, *["-"] * (len(header) - 1), f"n/a: {r.note}"))
            continue
        lo, hi = r.rates()[0], r.rates()[-1]
        rows.append(
            (
                r.contender.label,
                f"{r.ttfb():.3f}",
                vs(r.ttfb(), "ttfb"),
                f"{r.rate():,.0f} ({lo:,.0f}-{hi:,.0f})",
                vs(r.rate(), "rate"),
                f"{r.steady_cpu() * 1e3:.2f}",
                f"{r.capacity():,.0f}",
                vs(r.capacity(), "capacity"),
                f"{r.total_cpu() * 1e3:.2f}",
                f"{max(rep['peak_rss_kib'] for rep in r.reports) / 1024:.0f}",
                "",
            )
        )
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    print()
    print("  ".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(header, widths))))
    for row in rows:
        cells = [str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(row, widths))]
        print("  ".join(cells) + (f"  {row[-1]}" if row[-1] else ""))
    for r in results:
        if r.ok and "state_s" in r.reports[0]:
            us = statistics.median(rep["state_s"] for rep in r.reports) * 1e6
            size = max(rep["state_bytes"] for rep in r.reports)
            print(f"  state_dict() of {r.contender.name}: {us:.2f} us per call, {size} bytes pickled")


def print_summary(results, quick):
    by = {r.contender.name: r for r in results}
    fl, tc = by.get("feedline"), by.get("torch")
    if not (fl and fl.ok):
        print("\nSUMMARY: feedline did not run")
        return
    parts = []
    met = True
    if tc and tc.ok:
        ttfb, rate, cap = fl.ttfb() / tc.ttfb(), fl.rate() / tc.rate(), fl.capacity() / tc.capacity()
        parts += [
            f"first batch {ttfb:.3f}x torch (goal <= 0.1x)",
            f"steady {rate:.2f}x torch (goal >= 3x; {cap:.2f}x by steady CPU per image)",
        ]
        met = met and ttfb <= 0.1 and rate >= 3
    else:
        parts.append("torch baseline n/a")
    us = statistics.median(r["state_s"] for r in fl.reports) * 1e6
    size = max(r["state_bytes"] for r in fl.reports)
    parts += [f"state_dict {us:.2f} us (goal <= 10)", f"{size} B (goal <= 1024)"]
    met = met and us <= 10 and size <= 1024
    verdict = "smoke run, not meaningful" if quick else ("all goals met" if met else "goals NOT met")
    print(f"\nSUMMARY: {'; '.join(parts)}: {verdict}")


def parent_main(args):
    names = [c.name for c in CONTENDERS] if not args.only else args.only.split(",")
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        sys.exit(f"unknown contender(s) {', '.join(unknown)}; choose from {', '.join(BY_NAME)}")
    paths = ensure_dataset(args.data, args.images)
    for p in paths:  # into the page cache
        with open(p, "rb") as f:
            f.read()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"Loaders for a training loop: {args.images} JPEGs {WIDTH}x{HEIGHT} in {args.data}")
    print(f"  decode -> shorter side {SHORTER} -> crop {CROP}x{CROP} uint8 HWC -> batches of {BATCH} torch tensors")
    print(f"  {NUM_THREADS} threads / workers; steady rate over {args.steady} images after the first batch")
    print(f"  median of {args.rounds} round(s), contenders alternated (reversed every other round)")
    print(f"Python {platform.python_version()}, CPUs {os.cpu_count()}, load average {load}")
    if args.quick:
        print("--quick: smoke run only; do not read the numbers.")
    results = {name: Result(BY_NAME[name]) for name in names}
    for round_ in range(args.rounds):
        order = names if round_ % 2 == 0 else names[::-1]
        for name in order:
            print(f"  round {round_ + 1}: {name} ...", flush=True)
            run_contender(BY_NAME[name], args, results[name])
    ordered = [results[n] for n in names]
    print_table(ordered)
    print_summary(ordered, args.quick)
    failed = [
        r for r in ordered if r.contender.name.startswith("feedline") and not r.ok and r.note.startswith("worker")
    ]
    return 1 if failed else 0


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--images", type=int, default=10000, help="dataset size (default 10000)")
    p.add_argument("--steady", type=int, default=3000, help="images timed after the first batch (default 3000)")
    p.add_argument("--rounds", type=int, default=3, help="runs of every contender (median reported)")
    p.add_argument("--only", help=f"comma-separated contenders out of {','.join(BY_NAME)}")
    p.add_argument("--quick", action="store_true", help="smoke run: 200 images, 64 timed")
    p.add_argument("--data", default=str(DEFAULT_DATA), help="dataset folder (made if missing)")
    p.add_argument("--timeout", type=float, default=600, help="seconds before a worker is given up on")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.images, args.steady, args.rounds = 200, 64, 1
    if args.images < 1 or args.steady < 1 or args.steady + BATCH > args.images:
        p.error("--images and --steady must be positive, with --steady + 32 <= --images")
    return args


def main(argv=None):
    return dispatch(parse_args(argv), worker_main, parent_main)


if __name__ == "__main__":
    sys.exit(main())
