# SPDX-License-Identifier: Apache-2.0
"""Array and archive parsing: feedline.io against numpy, wave, tarfile, SPDL.

What is measured: how many files per second each loader turns into NumPy
arrays (or, for tar shards, into (name, data) members), on 2 cores. The inputs
are ``bytes`` objects in memory: every worker reads all of its files before
any timing, so the numbers are parsing + array creation, never disk or the
page cache. Each load function is mapped over the files with a
``concurrent.futures.ThreadPoolExecutor`` of 1 and of 2 workers
(``pool.map(load, files)``, the pool made once and reused, so thread start-up
is not timed); the consumer, in the main thread, counts items and payload
bytes of each result. The ``loop`` column is the same load function in a
plain ``for`` loop with no pool: it shows the per-file cost without the pool's
own cost (about 25 us per task on this machine: more than parsing a small
file costs in C++).

Row groups and their contenders (every contender gets the same bytes and must
produce the same arrays: same dtype, shape and values):

- NPY (float32 3x64x64, 48 KiB, made with ``np.save``):
  ``feedline.io.load_npy(data)`` | ``numpy.load(io.BytesIO(data))`` |
  ``spdl.io.load_npy(data)``. feedline and SPDL return views of ``data``
  (no copy of the payload); numpy.load copies it into a new array.
- NPZ and NPZ-compressed (``np.savez`` / ``np.savez_compressed``; a uint8
  3x96x96 image, a float32 (512,) embedding and, in every other file, an
  int64 label): open the archive and read every key, ``z[k] for k in
  z.files``, with ``feedline.io.load_npz`` | ``numpy.load(io.BytesIO(data))``
  (its NpzFile, closed after) | ``spdl.io.load_npz``.
- WAV (16-bit PCM stereo, 1 s at 16 kHz, made with ``wave``): result is int16
  (frames, channels) for all: ``feedline.io.load_wav(data)`` |
  ``np.asarray(spdl.io.load_wav(data))`` | ``wave.open(io.BytesIO(data))``,
  ``readframes(nframes)`` + ``np.frombuffer(...).reshape(-1, channels)`` |
  ``soundfile.read(io.BytesIO(data), dtype="int16", always_2d=True)``.
  feedline, SPDL and wave+frombuffer do not convert samples; soundfile
  decodes through libsndfile into a new array.
- TAR (WebDataset-like shards of 200 members: ``000123.jpg`` of 1-50 KiB of
  random bytes and ``000123.cls`` of a few bytes): list every member as
  ``(name, data)`` and take ``len(data)``, with ``feedline.io.iter_tarfile
  (data)`` | ``tarfile.open(fileobj=io.BytesIO(data))`` + ``extractfile(m)
  .read()`` for each regular member | ``spdl.io.iter_tarfile(data)``.
  feedline and SPDL yield memoryviews into ``data``; tarfile copies each
  member into new bytes (and ``tarfile.open``'s default mode first probes
  for gzip/bz2/xz, as users get it). Rates are members/s (and shards/s).
- TAR from a file object (the same shards, each wrapped in ``io.BytesIO``
  as a stream stands for a pipe, a socket or a response body): every
  contender reads it front to back and yields ``(name, bytes)``:
  ``feedline.io.iter_tarfile(f)`` | ``tarfile.open(fileobj=f, mode="r|")``
  (tarfile's stream mode) + ``extractfile(m).read()`` |
  ``spdl.io.iter_tarfile(f)``.

How it is measured (see the project's design notes on benchmarking): each
contender runs in its own process (this script with ``--worker GROUP:NAME``,
which prints one JSON line). A worker reads its inputs, then checks once that
its loader's output for every file matches the data that was written (dtype,
shape and CRC-32 of the values, or of every member's name and bytes; the
reference is recorded when the data is generated, not taken from any
loader). It then warms up one pass per mode (loop, 1 thread, 2 threads),
which also sets how many passes over the files make one timed run (about
0.5 s), and runs ``--repeat`` timed runs per mode (default 3), interleaving
the modes so that drift in machine load hits all of them; the median is
reported. Every timed run also checks the count of items and payload bytes.
CPU is user+sys of the worker (all threads) per file, from
``resource.getrusage``; peak RSS is the worker's ``ru_maxrss``, which
includes the in-memory inputs (the part above them is shown in brackets);
with 2 threads it also counts finished results waiting for the consumer,
which a loader that keeps the GIL while it runs (tarfile, feedline's
stream) piles up more of, as the consumer waits for the GIL.
A contender with wrong output is flagged and the script exits 1. Data is
generated once and cached under ``build/bench-data/arrays/``.

Goals for feedline: >= 2x numpy's files/s (NPY, NPZ rows), >= 5x tarfile's
members/s (TAR row), and not slower than SPDL on any row; judged at 1 and at
2 threads.

Run::

    python bench/python/arrays.py                    # 2000 NPY, 1000 NPZ/WAV, 50 shards
    python bench/python/arrays.py --quick            # smoke run, ~30 s
    python bench/python/arrays.py --files 500 --repeat 5
    python bench/python/arrays.py --only npy,tar:feedline,tar:spdl
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import importlib.metadata
import io
import json
import math
import os
import pathlib
import platform
import statistics
import sys
import time
import zlib

from benchlib import cpu_seconds, dispatch, peak_rss_kib, run_json

REPO = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_DATA = REPO / "build" / "bench-data" / "arrays"
DATA_VERSION = 1  # bump when the generators change, to regenerate the cache

THREADS = (1, 2)
MODES = ("loop", *(str(t) for t in THREADS))  # JSON keys: loop, "1", "2"
TARGET_RUN_S = 0.5  # one timed run lasts about this long (whole passes)
MAX_PASSES = 200

WAV_RATE, WAV_CHANNELS, WAV_SECONDS = 16_000, 2, 1.0
TAR_SAMPLES = 100  # samples per shard, two members each


# -- groups and contenders ------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Group:
    name: str
    title: str
    share: float  # files of this group per --files
    reference: str  # the baseline the >= Nx goal is measured against
    goal: float | None  # feedline >= goal x reference
    contenders: tuple[tuple[str, str], ...]  # (name, label); feedline first
    item_unit: str = "file"  # what rates count
    file_unit: str = "file"

    def count(self, files):
        return max(1, round(files * self.share))

    @property
    def baselines(self):
        return [name for name, _ in self.contenders if name != "feedline"]


_NPZ_CONTENDERS = (
    ("feedline", "feedline.io.load_npz"),
    ("numpy", "numpy.load(BytesIO)"),
    ("spdl", "spdl.io.load_npz"),
)
GROUPS = [
    Group(
        "npy",
        "NPY",
        1.0,
        "numpy",
        2.0,
        (("feedline", "feedline.io.load_npy"), ("numpy", "numpy.load(BytesIO)"), ("spdl", "spdl.io.load_npy")),
    ),
    Group("npz", "NPZ (np.savez, stored)", 0.5, "numpy", 2.0, _NPZ_CONTENDERS),
    Group("npz-compressed", "NPZ (np.savez_compressed)", 0.5, "numpy", 2.0, _NPZ_CONTENDERS),
    Group(
        "wav",
        "WAV",
        0.5,
        "wave",
        None,
        (
            ("feedline", "feedline.io.load_wav"),
            ("wave", "wave + np.frombuffer"),
            ("spdl", "spdl.io.load_wav"),
            ("soundfile", "soundfile.read"),
        ),
    ),
    Group(
        "tar",
        "TAR",
        1 / 40,
        "tarfile",
        5.0,
        (
            ("feedline", "feedline.io.iter_tarfile"),
            ("tarfile", "tarfile + extractfile"),
            ("spdl", "spdl.io.iter_tarfile"),
        ),
        item_unit="member",
        file_unit="shard",
    ),
    Group(
        "tar-stream",
        "TAR from a file object",
        1 / 40,
        "tarfile",
        None,
        (
            ("feedline", "feedline.io.iter_tarfile(f)"),
            ("tarfile", "tarfile.open(mode='r|')"),
            ("spdl", "spdl.io.iter_tarfile(f)"),
        ),
        item_unit="member",
        file_unit="shard",
    ),
]
GROUP_BY_NAME = {g.name: g for g in GROUPS}


# -- what a loader returns, reduced to comparable values --------------------------


def array_digest(a):
    """dtype, shape and CRC-32 of the values in C order: equal iff same array."""
    import numpy as np

    a = np.asarray(a)
    return f"{a.dtype.str}{tuple(a.shape)}:{zlib.crc32(np.ascontiguousarray(a)):08x}"


def dict_digest(arrays):
    return ";".join(f"{k}={array_digest(arrays[k])}" for k in sorted(arrays))


def members_digest(members):
    lines = "\n".join(f"{name}:{len(data)}:{zlib.crc32(data):08x}" for name, data in members)
    return f"{len(members)}:{zlib.crc32(lines.encode()):08x}"


def digest(group, out):
    if group.startswith("tar"):
        return members_digest(out)
    if group.startswith("npz"):
        return dict_digest(out)
    return array_digest(out)


def summarize(group, out):
    """(items, payload bytes) of one result: the consumer's cheap touch."""
    if group.startswith("tar"):
        return len(out), sum(len(data) for _, data in out)
    if group.startswith("npz"):
        return 1, sum(a.nbytes for a in out.values())
    return 1, out.nbytes


# -- data: generated once, with the expected digests --------------------------------


def _npy_file(i):
    import numpy as np

    arr = np.random.default_rng(i).standard_normal((3, 64, 64), dtype=np.float32)
    buf = io.BytesIO()
    np.save(buf, arr)
    return f"{i:06d}.npy", buf.getvalue(), array_digest(arr), 1, arr.nbytes


def _npz_arrays(i):
    import numpy as np

    rng = np.random.default_rng(i)
    # A smooth image plus noise, so that deflate has something to find, as
    # in real images; the embedding is noise and barely compresses.
    ramp = np.add.outer(np.arange(96), np.arange(96))[None] + 40 * np.arange(3)[:, None, None]
    image = (ramp + rng.integers(0, 16, (3, 96, 96))).astype(np.uint8)
    arrays = {"image": image, "embedding": rng.standard_normal(512, dtype=np.float32)}
    if i % 2 == 0:
        arrays["label"] = np.int64(i % 1000)
    return arrays


def _npz_file(i, compressed):
    import numpy as np

    arrays = _npz_arrays(i)
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    nbytes = sum(np.asarray(a).nbytes for a in arrays.values())
    return f"{i:06d}.npz", buf.getvalue(), dict_digest(arrays), 1, nbytes


def _wav_file(i):
    import wave

    import numpy as np

    rng = np.random.default_rng(i)
    frames = int(WAV_RATE * WAV_SECONDS)
    t = np.arange(frames) / WAV_RATE
    tone = 8000 * np.sin(2 * np.pi * (220 + i % 500) * t)[:, None]
    samples = (tone + rng.normal(0, 500, (frames, WAV_CHANNELS))).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(WAV_CHANNELS)
        w.setsampwidth(2)
        w.setframerate(WAV_RATE)
        w.writeframes(samples.tobytes())
    return f"{i:06d}.wav", buf.getvalue(), array_digest(samples), 1, samples.nbytes


def _tar_file(i):
    import tarfile

    import numpy as np

    rng = np.random.default_rng(i)
    members = []
    for j in range(TAR_SAMPLES):
        key = f"{i * TAR_SAMPLES + j:06d}"
        members.append((f"{key}.jpg", rng.bytes(int(rng.integers(1024, 50 * 1024 + 1)))))
        members.append((f"{key}.cls", f"{int(rng.integers(1000))}\n".encode()))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 1_700_000_000, 0o644
            tf.addfile(info, io.BytesIO(data))
    nbytes = sum(len(d) for _, d in members)
    return f"shard-{i:06d}.tar", buf.getvalue(), members_digest(members), len(members), nbytes


MAKERS = {
    "npy": _npy_file,
    "npz": lambda i: _npz_file(i, compressed=False),
    "npz-compressed": lambda i: _npz_file(i, compressed=True),
    "wav": _wav_file,
    "tar": _tar_file,
    "tar-stream": _tar_file,
}


def _load_manifest(folder):
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError):
        return {}
    return manifest["files"] if manifest.get("version") == DATA_VERSION else {}


def ensure_data(root, group, n):
    """Makes the first n files of a group (if missing); returns their manifest entries.

    The manifest holds, per file, the digest of what was written (the truth
    every loader is checked against), and its items and payload bytes.
    """
    folder = pathlib.Path(root) / group.name
    folder.mkdir(parents=True, exist_ok=True)
    files = _load_manifest(folder)
    by_index = {v["index"]: k for k, v in files.items()}
    entries, changed = [], False
    for i in range(n):
        name = by_index.get(i)
        if name is None or not (folder / name).exists():
            name, data, dig, items, nbytes = MAKERS[group.name](i)
            (folder / name).write_bytes(data)
            files[name] = {"index": i, "digest": dig, "items": items, "bytes": nbytes}
            changed = True
        entries.append({"path": str(folder / name), **files[name]})
    if changed:
        manifest = {"version": DATA_VERSION, "files": files}
        (folder / "manifest.json").write_text(json.dumps(manifest))
    return entries


# -- loaders: one function per contender, bytes -> result ----------------------------


def _npz_reader(open_npz):
    def read_all(data):
        z = open_npz(data)
        try:
            return {k: z[k] for k in z.files}
        finally:
            close = getattr(z, "close", None)  # numpy's NpzFile holds a zip file
            if close:
                close()

    return read_all


def _wave_read(data):
    import wave

    import numpy as np

    with wave.open(io.BytesIO(data), "rb") as w:
        channels, width = w.getnchannels(), w.getsampwidth()
        frames = w.readframes(w.getnframes())
    dtype = {1: np.uint8, 2: "<i2", 4: "<i4"}[width]
    return np.frombuffer(frames, dtype=dtype).reshape(-1, channels)


def _tarfile_members(data):
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        return [(m.name, tf.extractfile(m).read()) for m in tf if m.isfile()]


def _make_npy_loader(name):
    if name == "feedline":
        import feedline.io

        return feedline.io.load_npy
    if name == "spdl":
        import spdl.io

        return spdl.io.load_npy
    import numpy as np

    return lambda data: np.load(io.BytesIO(data))


def _make_npz_loader(name):
    if name == "feedline":
        import feedline.io

        return _npz_reader(feedline.io.load_npz)
    if name == "spdl":
        import spdl.io

        return _npz_reader(spdl.io.load_npz)
    import numpy as np

    return _npz_reader(lambda data: np.load(io.BytesIO(data)))


def _make_wav_loader(name):
    import numpy as np

    if name == "feedline":
        import feedline.io

        return feedline.io.load_wav
    if name == "spdl":
        import spdl.io

        # SPDL returns an array-interface object; np.asarray wraps it, no copy.
        return lambda data: np.asarray(spdl.io.load_wav(data))
    if name == "soundfile":
        import soundfile

        return lambda data: soundfile.read(io.BytesIO(data), dtype="int16", always_2d=True)[0]
    return _wave_read


def _tarfile_stream_members(data):
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(data), mode="r|") as tf:
        return [(m.name, tf.extractfile(m).read()) for m in tf if m.isfile()]


def _make_tar_loader(name, stream=False):
    if name == "tarfile":
        return _tarfile_stream_members if stream else _tarfile_members
    if name == "feedline":
        import feedline.io as module
    else:
        import spdl.io as module
    if stream:
        return lambda data: list(module.iter_tarfile(io.BytesIO(data)))
    return lambda data: list(module.iter_tarfile(data))


def make_loader(group, name):
    """Returns load(bytes) for a contender. Raises ImportError if it is missing."""
    if group == "npy":
        return _make_npy_loader(name)
    if group.startswith("npz"):
        return _make_npz_loader(name)
    if group == "wav":
        return _make_wav_loader(name)
    return _make_tar_loader(name, stream=group == "tar-stream")


# -- worker side: one contender in its own process ------------------------------


def verify(group, load, inputs, entries):
    """Checks every file's output once against the manifest; returns a report."""
    mismatched, errors, example = 0, 0, ""
    for data, entry in zip(inputs, entries):
        try:
            got = digest(group, load(data))
        except Exception as e:  # a loader that raises has failed that file
            errors += 1
            example = example or f"{os.path.basename(entry['path'])}: {type(e).__name__}: {e}"
            continue
        if got != entry["digest"]:
            mismatched += 1
            example = example or f"{os.path.basename(entry['path'])}: got {got}, expected {entry['digest']}"
    return {"mismatched": mismatched, "errors": errors, "example": example[:300]}


def _one_pass(group, load, inputs, pool):
    results = map(load, inputs) if pool is None else pool.map(load, inputs)
    items = nbytes = 0
    for out in results:
        i, b = summarize(group, out)
        items += i
        nbytes += b
    return items, nbytes


def _timed(group, load, inputs, pool, passes):
    cpu0, wall0 = cpu_seconds(), time.perf_counter()
    items = nbytes = 0
    for _ in range(passes):
        i, b = _one_pass(group, load, inputs, pool)
        items += i
        nbytes += b
    wall, cpu = time.perf_counter() - wall0, cpu_seconds() - cpu0
    return {"wall_s": wall, "cpu_s": cpu, "items": items, "bytes": nbytes}


def _measure(group, load, inputs, pools, args):
    """Warm-up and timed runs for every mode; returns {mode: {passes, runs}}."""
    modes = {}
    for mode in MODES:
        warm = _timed(group, load, inputs, pools[mode], 1)
        # Whole passes, so that every run sees every file equally often.
        passes = 1 if args.quick else min(MAX_PASSES, max(1, math.ceil(TARGET_RUN_S / warm["wall_s"])))
        modes[mode] = {"passes": passes, "runs": []}
    for _ in range(args.repeat):
        for mode in MODES:  # interleaved: load drift hits every mode alike
            modes[mode]["runs"].append(_timed(group, load, inputs, pools[mode], modes[mode]["passes"]))
    return modes


def _read_inputs(entries):
    inputs = []
    for entry in entries:
        with open(entry["path"], "rb") as f:
            inputs.append(f.read())
    return inputs


def worker_main(spec, args):
    """Measures one contender; prints one JSON line on stdout."""
    group, name = spec.split(":")
    try:
        load = make_loader(group, name)
    except (ImportError, OSError) as e:  # soundfile raises OSError without libsndfile
        if name == "feedline":
            raise  # feedline missing is a failure, not a skipped baseline
        missing = getattr(e, "name", None) or name
        print(json.dumps({"unavailable": f"{missing.split('.')[0]} not installed"}))
        return
    entries = ensure_data(args.data, GROUP_BY_NAME[group], GROUP_BY_NAME[group].count(args.files))
    inputs = _read_inputs(entries)
    rss_inputs = peak_rss_kib()
    report = {"verify": verify(group, load, inputs, entries), "rss_inputs_kib": rss_inputs}
    if not (report["verify"]["mismatched"] or report["verify"]["errors"]):
        pools = {"loop": None}
        pools.update({str(t): concurrent.futures.ThreadPoolExecutor(t) for t in THREADS})
        report["modes"] = _measure(group, load, inputs, pools, args)
        for pool in pools.values():
            if pool is not None:
                pool.shutdown()
    report["expected"] = {"items": sum(e["items"] for e in entries), "bytes": sum(e["bytes"] for e in entries)}
    report["peak_rss_kib"] = peak_rss_kib()
    print(json.dumps(report))


# -- parent side: workers, tables, goals ----------------------------------------


@dataclasses.dataclass
class Result:
    group: Group
    name: str
    label: str
    items_per_s: dict = dataclasses.field(default_factory=dict)  # mode -> rate
    files_per_s: dict = dataclasses.field(default_factory=dict)
    cpu_ms_per_item: dict = dataclasses.field(default_factory=dict)
    peak_rss_mib: float | None = None
    over_inputs_mib: float | None = None
    ok: bool = False
    note: str = ""  # why ok is False, or why there are no numbers
    skipped: bool = False  # not installed: not a failure


def run_contender(group, name, label, args):
    result = Result(group, name, label)
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", f"{group.name}:{name}"]
    cmd += ["--files", str(args.files), "--repeat", str(args.repeat), "--data", str(args.data)]
    if args.quick:
        cmd.append("--quick")
    report, result.note = run_json(cmd, args.timeout, f"{group.name}:{name}")
    if report is not None:
        _fill(result, report, group.count(args.files))
    return result


def _wrong_runs_note(modes, expected):
    for mode, m in modes.items():
        for r in m["runs"]:
            items, nbytes = expected["items"] * m["passes"], expected["bytes"] * m["passes"]
            if r["items"] != items or r["bytes"] != nbytes:
                return f"{mode}: got {r['items']} items / {r['bytes']} B, expected {items} / {nbytes}"
    return ""


def _fill(result, report, n_files):
    """Turns a worker's JSON report into medians and an ok verdict."""
    if "unavailable" in report:
        result.skipped, result.note = True, report["unavailable"]
        return
    v = report["verify"]
    if v["mismatched"] or v["errors"]:
        result.note = f"{v['mismatched']} wrong, {v['errors']} raised of {n_files} ({v['example']})"
        return
    modes, expected = report["modes"], report["expected"]
    for mode, m in modes.items():
        runs, passes = m["runs"], m["passes"]
        result.items_per_s[mode] = statistics.median(r["items"] / r["wall_s"] for r in runs)
        result.files_per_s[mode] = statistics.median(n_files * passes / r["wall_s"] for r in runs)
        result.cpu_ms_per_item[mode] = statistics.median(r["cpu_s"] / r["items"] * 1e3 for r in runs)
    result.peak_rss_mib = report["peak_rss_kib"] / 1024
    result.over_inputs_mib = (report["peak_rss_kib"] - report["rss_inputs_kib"]) / 1024
    result.note = _wrong_runs_note(modes, expected)
    result.ok = not result.note


def _fmt_rate(x):
    return "-" if x is None else f"{x:,.0f}"


def _ratio(result, base, mode):
    if not (result.ok and base and base.ok):
        return None
    return result.items_per_s[mode] / base.items_per_s[mode]


def _fmt_pair(a, b, fmt):
    if a is None or b is None:
        return "n/a"
    return f"{format(a, fmt)} / {format(b, fmt)}"


def _row(result, by_name, group):
    if result.skipped:
        n_cols = len(_header(group)) - 2  # all but the label and the verdict
        return (result.label, *["-"] * n_cols, f"n/a: {result.note}")
    rate = result.items_per_s
    cells = [result.label, _fmt_rate(rate.get("loop")), _fmt_rate(rate.get("1")), _fmt_rate(rate.get("2"))]
    if group.file_unit != group.item_unit:
        f = result.files_per_s
        cells.append(_fmt_pair(f.get("1"), f.get("2"), ",.1f") if result.ok else "-")
    scaling = rate["2"] / rate["1"] if result.ok else None
    cells.append("-" if scaling is None else f"{scaling:.2f}x")
    for b in group.baselines:
        base = by_name.get(b)
        cells.append(_fmt_pair(_ratio(result, base, "1"), _ratio(result, base, "2"), ".2f"))
    cpu = result.cpu_ms_per_item
    cells.append(_fmt_pair(cpu.get("1"), cpu.get("2"), ".3f") if result.ok else "-")
    rss = "-" if result.peak_rss_mib is None else f"{result.peak_rss_mib:.0f} (+{result.over_inputs_mib:.0f})"
    cells.append(rss)
    cells.append("yes" if result.ok else f"NO: {result.note}")
    return tuple(cells)


def _header(group):
    u = group.item_unit
    cells = ["contender", f"loop {u}s/s", f"1 thr {u}s/s", f"2 thr {u}s/s"]
    if group.file_unit != group.item_unit:
        cells.append(f"{group.file_unit}s/s 1/2 thr")
    cells.append("2 thr/1 thr")
    cells += [f"vs {b} 1/2 thr" for b in group.baselines]
    cells += [f"CPU ms/{u} 1/2 thr", "peak RSS MiB (+over inputs)", "ok"]
    return tuple(cells)


def print_table(group, results, dataset_line):
    by_name = {r.name: r for r in results}
    header = _header(group)
    rows = [_row(r, by_name, group) for r in results]
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header) - 1)]

    def line(cells):
        # Label left, numbers right, the verdict free-form at the end.
        parts = [str(cells[0]).ljust(widths[0])]
        parts += [str(c).rjust(w) for c, w in zip(cells[1:-1], widths[1:])]
        return "  ".join([*parts, str(cells[-1])])

    print(f"\n{group.title}: {dataset_line}")
    print(line(header))
    print("  ".join("-" * w for w in widths) + "  ---")
    for row in rows:
        print(line(row))


def _goal_line(text, fl, base, target):
    if base is None or base.skipped:
        return f"  {text:48} n/a ({base.note if base else 'not run'})"
    r1, r2 = _ratio(fl, base, "1"), _ratio(fl, base, "2")
    if r1 is None or r2 is None:
        return f"  {text:48} n/a (a contender failed)"
    if r1 >= target and r2 >= target:
        verdict = "met"
    elif min(r1, r2) >= 0.95 * target:
        verdict = "NOT met (within 5%: may be noise)"
    else:
        verdict = "NOT met"
    return f"  {text:48} 1 thr {r1:5.2f}x  2 thr {r2:5.2f}x  {verdict}"


def print_goals(all_results, quick):
    print("\nGoals for feedline, judged at 1 and 2 threads" + (" -- smoke run, not meaningful:" if quick else ":"))
    for group, results in all_results:
        by_name = {r.name: r for r in results}
        fl = by_name.get("feedline")
        if fl is None or not fl.ok:
            continue
        if group.goal is not None and group.reference in by_name:
            text = f"{group.title}: >= {group.goal:g}x {group.reference}"
            print(_goal_line(text, fl, by_name[group.reference], group.goal))
        if "spdl" in by_name:
            print(_goal_line(f"{group.title}: not slower than SPDL", fl, by_name["spdl"], 1.0))


def describe(group, entries):
    sizes = [os.path.getsize(e["path"]) for e in entries]
    total = sum(sizes)
    unit = group.file_unit + ("s" if len(entries) != 1 else "")
    text = f"{len(entries)} {unit}, {total / 2**20:.1f} MiB ({total / len(entries) / 1024:.1f} KiB each"
    items = sum(e["items"] for e in entries)
    if items != len(entries):
        text += f", {items / len(entries):.0f} {group.item_unit}s each"
    payload = sum(e["bytes"] for e in entries)
    return text + f"; payload {payload / 2**20:.1f} MiB)"


def _version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def print_header(args):
    cpus = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cpus
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print("Array/archive parsing from bytes in memory (no disk): NPY, NPZ, WAV -> numpy arrays; TAR -> members")
    print("  ThreadPoolExecutor(1 | 2).map(load, files); 'loop' = plain for loop, no pool")
    versions = ", ".join(f"{d} {_version(d)}" for d in ("feedline", "spdl", "numpy", "soundfile"))
    print(f"Python {platform.python_version()}, {versions}")
    print(f"CPUs: {cpus} ({usable} usable), load average at start: {load}")
    print(
        f"Median of {args.repeat} timed run(s) per mode after a warm-up pass; a run = whole passes, "
        f"about {TARGET_RUN_S} s; each contender in its own process."
    )
    print("Ratios = feedline's (or the row's) rate / the baseline's, at 1 / 2 threads. CPU = user+sys of the worker.")
    print("Peak RSS includes the inputs held in memory; (+N) is the part above them.")
    if args.quick:
        print("--quick: smoke run only; do not read the numbers.")


def _selection(only):
    """--only: group names or group:contender; returns [(group, [(name, label)])]."""
    if not only:
        return [(g, list(g.contenders)) for g in GROUPS]
    wanted = {}
    for spec in only.split(","):
        gname, _, cname = spec.partition(":")
        group = GROUP_BY_NAME.get(gname)
        names = [n for n, _ in group.contenders] if group else []
        if group is None or (cname and cname not in names):
            sys.exit(f"unknown {spec!r}; groups: {', '.join(GROUP_BY_NAME)} (or GROUP:CONTENDER)")
        wanted.setdefault(gname, set()).update([cname] if cname else names)
    return [(g, [c for c in g.contenders if c[0] in wanted[g.name]]) for g in GROUPS if g.name in wanted]


def parent_main(args):
    selection = _selection(args.only)
    print_header(args)
    all_results = []
    for group, contenders in selection:
        # Made here, once, so that the workers only read.
        entries = ensure_data(args.data, group, group.count(args.files))
        results = []
        for name, label in contenders:
            print(f"  running {group.name}:{name} ...", flush=True)
            results.append(run_contender(group, name, label, args))
        print_table(group, results, describe(group, entries))
        all_results.append((group, results))
    print_goals(all_results, args.quick)
    failed = [r for _, rs in all_results for r in rs if not r.ok and not r.skipped]
    if failed:
        print("\nWrong or missing results: " + ", ".join(f"{r.group.name}:{r.name}" for r in failed))
    return 1 if failed else 0


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--files", type=int, default=2000, help="NPY files; NPZ and WAV get half as many, TAR one shard per 40"
    )
    p.add_argument("--repeat", type=int, default=3, help="timed runs per mode (median is reported)")
    p.add_argument("--only", help=f"comma-separated groups ({','.join(GROUP_BY_NAME)}) or GROUP:CONTENDER")
    p.add_argument("--quick", action="store_true", help="smoke run: 40 files, 1 repeat, 1 pass per run")
    p.add_argument("--data", default=str(DEFAULT_DATA), help="cache folder for the generated files")
    p.add_argument("--timeout", type=float, default=600, help="seconds before a worker is given up on")
    # Internal: run one contender in this process.
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.files, args.repeat = 40, 1
    if args.files < 1 or args.repeat < 1:
        p.error("--files and --repeat must be positive")
    return args


def main(argv=None):
    return dispatch(parse_args(argv), worker_main, parent_main)


if __name__ == "__main__":
    sys.exit(main())
