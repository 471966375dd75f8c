# SPDX-License-Identifier: Apache-2.0
"""Video decoding to RGB arrays: feedline against SPDL, PyAV and torchcodec.

What is measured: frames per second delivered as uint8 RGB arrays, on
2 cores, from a set of H.264 clips at 1280x720 and 1920x1080, in three
scenarios, and then how many files per second each library demuxes:

- ``whole``: every clip decoded from start to end into one array of shape
  (frames, H, W, 3).
- ``window``: ``--windows`` samples (clip, t), drawn with a fixed seed
  (alternately a 720p and a 1080p clip, uniformly among those); each loads the
  8 consecutive frames whose pts lies in the half-open window
  [t, t + 8 / fps), into an array of shape (8, H, W, 3). ``t`` is drawn as
  (k + u) / fps with k uniform and u uniform in [0.1, 0.9], so that no frame
  sits within rounding of either end of the window and the window always
  holds exactly 8 frames (frames k+1 .. k+8). Every sample opens the file
  anew, as a data loader does. x264's default keyint=250 is longer than the
  clips, which have one or two keyframes each (the header lists them), so a
  window at t costs decoding every frame from the keyframe before t up to
  t + 8 / fps; only the 8 kept frames need converting to RGB.
- ``resize``: every clip decoded from start to end straight to 224x224 RGB
  (stretched, bicubic), shape (frames, 224, 224, 3): the usual training
  input. feedline: ``load_video(path, filter_desc=get_video_filter_desc(
  scale_width=224, scale_height=224, scale_mode=None))`` (a scale + format
  chain, which feedline runs as one swscale call per frame into the output
  instead of a filter graph); SPDL: the same ``filter_desc`` from its own
  ``get_video_filter_desc`` (a filter graph); PyAV: ``frame.to_ndarray(
  format="rgb24", width=224, height=224, interpolation="BICUBIC")`` (one
  swscale call per frame). torchcodec is not measured here.
- ``demux`` (files per second, not frames): each clip's video packets read
  into memory, ``--demux-opens`` files per pass (the clips in turn) spread
  over a ``ThreadPoolExecutor`` of 1, 2, 4 and 8 threads
  (``--demux-threads``). Opening a container may probe its streams
  (``avformat_find_stream_info``: opening decoders, which FFmpeg may
  serialise behind a global lock, and decoding the first frames).
  feedline's ``demux_video`` probes by default, as SPDL's and PyAV's do, so
  that the codec metadata (pixel format, ...) is complete; it is measured
  also with ``find_stream_info=False`` (what its native ``load_video`` and
  ``ops.demux_video`` do for MP4 and Matroska). The packet count of every
  file is checked against the clip's frame count.

The bounds (``limit``, whole and resize only): ``build/release/bench/cpp/
video_limit 2`` decodes the same clips in the same order on two C++ threads
that take the next clip as a thread pool does, straight on libavformat +
libavcodec (the system FFmpeg, as feedline's and SPDL's), one decoder thread
per clip, with no pipeline or Python. ``limit/threads`` converts each frame
with one ``sws_scale`` call (rgb24 at the clip's size, or 224x224 bicubic)
into a reused array on huge pages; ``limit/threads-decode`` drops the frames
undecoded into pixels: decoding alone, which no loader that decodes with
FFmpeg one clip per core can pass, however it converts. Their frames/s count
both threads busy from start to end (the clips' decode times summed, over
2): a pass ends with one thread waiting for the other's last clip, which a
loader that gives that clip more decoder threads partly avoids. The goals block
prints each scenario's feedline and best baseline as a share of both, and
where the goal would sit. Build it with ``cmake --build build/release
--target video_limit``; it is reported as not built otherwise.

Frames/s counts delivered frames only (whole: all of them; window: 8 per
sample), in a pass over all items of the scenario, 720p and 1080p mixed.

The contenders, each in one or more configurations (``--configs all`` runs
every configuration below; the default ``--configs best`` runs the two that
measured best for each baseline in ``--configs all`` runs on this 2-core VM,
see ``BEST``; each library's rate is that of its best configuration in the
run):

- ``feedline``: ``feedline.io.load_video(path, timestamp=None | (t, e))``,
  ``numpy.asarray`` of the returned Buffer (no copy), mapped over the items by
  a ``concurrent.futures.ThreadPoolExecutor(2)`` (the decode releases the GIL).
- ``pyav`` (PyAV, with the FFmpeg it bundles): ``av.open(path)``, the first
  video stream, ``frame.to_ndarray(format="rgb24")`` for every frame kept,
  ``np.stack``. Windows: ``container.seek(int(t / stream.time_base),
  stream=stream, backward=True)`` (to the keyframe before t), then decode,
  drop frames with ``frame.time < t`` and stop at the first ``>= t + 8/fps``.
  Codec threading: PyAV's default (``thread_type="SLICE"``, which does
  nothing on x264's single-slice frames) or ``"AUTO"`` (FFmpeg frame + slice
  threads, count chosen by FFmpeg).
- ``spdl``: ``spdl.io.to_numpy(spdl.io.load_video(path, timestamp=None |
  (t, e), decode_config=...))`` (SPDL's default filter converts to rgb24;
  ``to_numpy`` does not copy). Decoder threads: SPDL's default (1) or
  ``decoder_options={"threads": "0"}`` (FFmpeg chooses).
- ``torchcodec``: ``torchcodec.decoders.VideoDecoder(path,
  seek_mode="approximate" | "exact", num_ffmpeg_threads=1 | 0,
  dimension_order="NHWC")``. torchcodec decodes to NHWC natively; its default
  NCHW is a no-copy permuted view of the same memory, so asking for NHWC is
  the same work and gives the same shape as everyone else. Whole clip:
  ``get_frames_in_range(0, len(decoder)).data``. Window: frame indices
  ``first = ceil(t * fps)`` .. ``first + 7`` with ``fps`` from the decoder's
  metadata (the clips are constant frame rate), ``get_frames_in_range(first,
  first + 8)``; its time-based ``get_frames_played_in_range(t, e)`` also
  returns the frame being displayed at t (pts < t), 9 frames here, which is
  not the work the others do.

How the work is spread over the 2 cores (the configuration's first word):

- ``threads``: ``ThreadPoolExecutor(2)``, items submitted in order with at
  most 4 (whole) / 16 (window) in flight, results consumed in order. The pool
  is made once per worker process (not timed).
- ``processes``: ``torch.utils.data.DataLoader(items, batch_size=None,
  num_workers=2, prefetch_factor=2 (whole) / 8 (window))``, each item turned
  into a tensor with ``torch.from_numpy`` in the worker process; the tensors
  reach the parent through shared memory, as they do for users. The
  DataLoader is made per timed run (persistent_workers=False), so worker
  start-up (fork) is inside the timing, as in ``images.py``.
- ``loop``: a plain loop over the items in the calling thread, relying on the
  decoder's own threads (FFmpeg frame threading) for the second core.

The comparison of ``threads`` with ``processes`` for the same decoder
settings says whether a library releases the GIL while it decodes (if it does,
threads do at least as well as processes); the script prints it when both ran.

How it is measured (the project's design notes on benchmarking): each
(scenario, configuration) runs in its own process (this script with
``--worker SCENARIO:CONFIG``, printing one JSON line), after the parent has
read every clip once so that all of them come from the page cache. A worker
first decodes one item outside any timing (a baseline that fails here, e.g.
a library that cannot load its FFmpeg, is reported as unavailable), warms up
on the first few items, then runs ``--repeat`` timed passes over all items
(default 3); the median is reported. CPU time is user+sys of the worker (all
threads) and its children (the DataLoader's worker processes, reaped at the
end of each pass), per delivered frame; peak RSS is ``ru_maxrss`` of the
worker plus that of its largest child (forked DataLoader workers share pages
with their parent, so for them it over-counts). "frames ok" checks that every
item of every timed pass came back with the expected number of frames and the
shape (n, H, W, 3) uint8; a contender that drops or adds frames has not won,
and the script exits 1. After the table, a check in a separate process
decodes two windows and three frames of a whole clip with every library and
reports the mean absolute difference from PyAV's pixels (the clips carry
per-frame noise, so a window off by one frame differs by several grey levels,
where colour-conversion differences are a fraction of one).

The clips are made once with the ``ffmpeg`` CLI and cached under
``build/bench-data/video/``: ``testsrc2`` at 30 fps with per-frame noise
(``noise=alls=N:allf=t``, N = ``--noise``, default 8: about 6.6 Mbit/s at
720p and 15 at 1080p, the range of real footage; alls=20 would give ~57 Mbit/s
at 720p, where entropy decoding is nearly all the work), encoded by libx264 with its defaults (preset medium, crf 23,
B-frames, keyint 250), yuv420p, MP4. The header prints the encoder's
settings as recorded in the stream.

Goals for feedline (from the issue): with its default settings, >= 1.1x the
best baseline's frames/s on whole clips, >= 1.5x on windowed sampling and
>= 1.3x decoding to 224x224. The last line of the output (``SUMMARY:``) gives
the three ratios and the demux rates at 1 and 8 threads.

Run::

    python bench/python/video.py                  # 4+4 clips of 2 s, 64 windows, median of 3
    python bench/python/video.py --quick          # smoke run: 1+1 clips of 1 s, 4 windows
    python bench/python/video.py --configs all    # every configuration (how BEST was chosen)
    python bench/python/video.py --only pyav,spdl --scenarios window --windows 128
    python bench/python/video.py --only feedline,limit --scenarios resize
    python bench/python/video.py --scenarios demux --demux-threads 1,2,4,8,16
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import importlib.metadata
import itertools
import json
import os
import pathlib
import platform
import statistics
import sys
import time

from benchlib import cpu_seconds, dispatch, peak_rss_kib, run_json
from video_parts import (
    DEMUXERS,
    FPS,
    LIMIT_BIN,
    RESOLUTIONS,
    WINDOW_FRAMES,
    ensure_clips,
    feedline_loader,
    make_demuxer,
    make_items,
    make_loader,
    pyav_loader,
    read_clips,
    run_limit,
    spdl_loader,
    torchcodec_loader,
    x264_settings,
)
from video_report import LIBS, print_counts_agree, print_gil, print_goals, print_table

REPO = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_DATA = REPO / "build" / "bench-data" / "video"

NUM_WORKERS = 2
FRAME_SCENARIOS = ("whole", "window", "resize")
SCENARIOS = (*FRAME_SCENARIOS, "demux")
IN_FLIGHT = {"whole": 4, "window": 16, "resize": 4}  # items submitted ahead of the consumer
# Pixels of the same frame from two libraries differ by colour conversion
# only (a fraction of a grey level); a frame off by one differs by several.
SAME_FRAME_MAD = 2.0


# -- contenders and their configurations -----------------------------------------


@dataclasses.dataclass(frozen=True)
class Config:
    name: str  # "lib/variant"; the variant starts with threads|processes|loop
    label: str
    options: dict = dataclasses.field(default_factory=dict, hash=False, compare=False)

    @property
    def lib(self):
        return self.name.split("/")[0]

    @property
    def spread(self):
        return self.name.split("/")[1].split("-")[0]


def _tc(seek_mode, threads):
    return {"seek_mode": seek_mode, "threads": threads}


CONFIGS = [
    Config("feedline/threads", "2 threads, decoder threads auto (default)", {"threads": None}),
    Config("feedline/threads-t2", "2 threads, decoder threads 2", {"threads": 2}),
    Config("pyav/threads", "2 threads, PyAV default codec threading (SLICE)", {"thread_type": None}),
    Config("pyav/threads-auto", "2 threads, thread_type=AUTO", {"thread_type": "AUTO"}),
    Config("pyav/processes", "2 processes (DataLoader), default threading", {"thread_type": None}),
    Config("pyav/processes-auto", "2 processes (DataLoader), thread_type=AUTO", {"thread_type": "AUTO"}),
    Config("pyav/loop-auto", "1 thread, thread_type=AUTO", {"thread_type": "AUTO"}),
    Config("spdl/threads", "2 threads, decoder threads 1 (SPDL default)", {"threads": None}),
    Config("spdl/threads-t0", "2 threads, decoder threads 0 (FFmpeg picks)", {"threads": 0}),
    Config("spdl/processes", "2 processes (DataLoader), decoder threads 1", {"threads": None}),
    Config("spdl/loop-t0", "1 thread, decoder threads 0 (FFmpeg picks)", {"threads": 0}),
    Config("torchcodec/threads", "2 threads, approximate, ffmpeg threads 1", _tc("approximate", 1)),
    Config("torchcodec/threads-exact", "2 threads, exact, ffmpeg threads 1", _tc("exact", 1)),
    Config("torchcodec/threads-t0", "2 threads, approximate, ffmpeg threads 0", _tc("approximate", 0)),
    Config("torchcodec/processes", "2 processes (DataLoader), approximate, threads 1", _tc("approximate", 1)),
    Config("torchcodec/loop-t0", "1 thread, approximate, ffmpeg threads 0", _tc("approximate", 0)),
    Config("limit/threads", "bare C++ loop, 2 threads: FFmpeg decode + 1 sws_scale/frame", {"mode": None}),
    Config("limit/threads-decode", "bare C++ loop, 2 threads: FFmpeg decode only", {"mode": "decode"}),
]
CONFIG_BY_NAME = {c.name: c for c in CONFIGS}

# What --configs best runs: per scenario and library, the configurations that
# measured best in --configs all runs on this 2-core VM. Both spreads of work
# were tried for every library: 2 threads beat 2 DataLoader processes for PyAV
# and SPDL in both scenarios (1.3-2.2x; a process pays for copying every frame
# into shared memory, 5-9 ms of CPU per 1080p frame), and a single decoder with
# FFmpeg's own threads ("loop") lost to 2 threads. Between FFmpeg's default
# single-threaded decoding and its frame threads inside a 2-thread pool the
# runs disagreed from one run to the next (the machine was shared), so both
# run and the better one counts as the library's rate. torchcodec could not be
# measured here (the PyPI wheel needs a CUDA build of torch); its entries are
# approximate seek mode (exact mode scans the whole file on every open) with
# 1 and with FFmpeg's choice of threads. Rerun --configs all where it loads.
_TWO_EACH = [
    "feedline/threads",
    "feedline/threads-t2",
    "pyav/threads",
    "pyav/threads-auto",
    "spdl/threads",
    "spdl/threads-t0",
    "torchcodec/threads",
    "torchcodec/threads-t0",
]
_LIMITS = ["limit/threads", "limit/threads-decode"]
BEST = {
    "whole": _TWO_EACH + _LIMITS,
    "window": _TWO_EACH,
    # torchcodec does not resize while decoding.
    "resize": [n for n in _TWO_EACH if not n.startswith("torchcodec/")] + _LIMITS,
}


# -- spreading the items over the cores --------------------------------------------


def _bounded_map(pool, fn, items, depth):
    """pool.map in order, with at most `depth` items submitted ahead (memory)."""
    it = iter(items)
    pending = collections.deque(pool.submit(fn, x) for x in itertools.islice(it, depth))
    while pending:
        out = pending.popleft().result()
        for x in itertools.islice(it, 1):
            pending.append(pool.submit(fn, x))
        yield out


class _TorchItems:
    """A map-style dataset over the items (any object with len/getitem works)."""

    def __init__(self, items, load):
        self.items, self.load = items, load

    def __len__(self):
        return len(self.items)

    def __getitem__(self, index):
        import torch

        out = self.load(self.items[index])
        return out if isinstance(out, torch.Tensor) else torch.from_numpy(out)


def make_producer(config, load, scenario):
    """Returns produce(items) -> iterator of outputs in item order, and a closer."""
    if config.spread == "loop":
        return (lambda items: map(load, items)), (lambda: None)
    if config.spread == "threads":
        import concurrent.futures

        pool = concurrent.futures.ThreadPoolExecutor(NUM_WORKERS)
        return (lambda items: _bounded_map(pool, load, items, IN_FLIGHT[scenario])), pool.shutdown
    if config.spread == "processes":
        from torch.utils.data import DataLoader

        prefetch = IN_FLIGHT[scenario] // NUM_WORKERS

        def produce(items):
            dataset = _TorchItems(items, load)
            yield from DataLoader(
                dataset, batch_size=None, num_workers=NUM_WORKERS, prefetch_factor=prefetch, persistent_workers=False
            )

        return produce, (lambda: None)
    raise ValueError(config.name)


# -- worker side: one (scenario, configuration) in its own process -----------------


def _inspect(out, item):
    """'' if out is (expected, H, W, 3) uint8, else what is wrong."""
    shape = tuple(out.shape)
    want = (item.expected, item.height, item.width, 3)
    if str(out.dtype) not in ("uint8", "torch.uint8"):
        return f"dtype {out.dtype}"
    if shape != want:
        return f"shape {shape}, expected {want}"
    return ""


def _timed(produce, items):
    cpu0, wall0 = cpu_seconds(), time.perf_counter()
    frames, counts, bad, example = 0, [], 0, ""
    for item, out in zip(items, produce(items)):
        n = int(out.shape[0])
        frames += n
        counts.append(n)
        wrong = _inspect(out, item)
        if wrong:
            bad += 1
            example = example or f"{os.path.basename(item.path)} window={item.window}: {wrong}"
        del out  # a whole 1080p clip is hundreds of MB: free it before the next
    wall, cpu = time.perf_counter() - wall0, cpu_seconds() - cpu0
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "frames": frames,
        "items": len(counts),
        "counts": counts,
        "bad": bad,
        "example": example,
    }


def _unavailable_reason(e):
    # torchcodec's "Could not load this library: <path>" hides the reason
    # (e.g. a missing CUDA library) in __cause__: show that one.
    cause = e.__cause__ if e.__cause__ is not None else e
    return f"{type(e).__name__}: {cause}"[:160]


def lib_info(lib):
    """Version (and FFmpeg) of a library, as loaded in this process."""
    try:
        if lib == "pyav":
            import av

            return f"PyAV {av.__version__}, bundled FFmpeg {av.ffmpeg_version_info}"
        if lib == "spdl":
            import spdl.io.utils

            libavcodec = spdl.io.utils.get_ffmpeg_versions().get("libavcodec")
            return f"SPDL {_version('spdl')}, system FFmpeg (libavcodec {'.'.join(map(str, libavcodec or ()))})"
        if lib == "torchcodec":
            return f"torchcodec {_version('torchcodec')}, torch {_version('torch')}, system FFmpeg"
        if lib == "feedline":
            return f"feedline {_version('feedline')}, system FFmpeg"
    except Exception as e:  # informational only
        return f"{lib}: {type(e).__name__}"
    return lib


def worker_main(spec, args):
    """Measures one configuration in one scenario; prints one JSON line."""
    scenario, name = spec.split(":", 1)
    if scenario == "demux":
        demux_worker(name, args)
        return
    config = CONFIG_BY_NAME[name]
    items = make_items(scenario, read_clips(args), args.windows)
    try:
        load = make_loader(config)
        produce, close = make_producer(config, load, scenario)
    except (ImportError, AttributeError, OSError) as e:
        # feedline too: its load_video may not be built yet.
        print(json.dumps({"unavailable": _unavailable_reason(e)}))
        return
    if config.lib != "feedline":
        try:  # e.g. SPDL without a loadable FFmpeg fails on first use
            load(items[0])
        except Exception as e:
            print(json.dumps({"unavailable": _unavailable_reason(e)}))
            return
    n_warm = 1 if args.quick else min(len(items), 2 if scenario == "whole" else 4)
    warmup = _timed(produce, items[:n_warm])
    runs = [_timed(produce, items) for _ in range(args.repeat)]
    close()
    for r in runs[1:]:
        del r["counts"]  # the first run's per-item counts are enough for the table
    print(json.dumps({"warmup": warmup, "runs": runs, "peak_rss_kib": peak_rss_kib(), "info": lib_info(config.lib)}))


def _demux_paths(args):
    clips = make_items("whole", read_clips(args), 0)
    return [(c.path, c.expected) for c in itertools.islice(itertools.cycle(clips), args.demux_opens)]


def demux_worker(spec, args):
    """Demuxes --demux-opens files with NAME on THREADS threads; one JSON line."""
    import concurrent.futures

    name, threads = spec.rsplit(":", 1)
    work = _demux_paths(args)
    try:
        demux = make_demuxer(name)
        demux(work[0][0])
    except Exception as e:  # a baseline that is not installed or cannot load its FFmpeg
        print(json.dumps({"unavailable": _unavailable_reason(e)}))
        return
    paths = [p for p, _ in work]
    expected = [n for _, n in work]
    with concurrent.futures.ThreadPoolExecutor(int(threads)) as pool:
        list(pool.map(demux, paths[: 2 * int(threads)]))  # warm-up: threads started, code paged in
        runs = []
        for _ in range(args.repeat):
            cpu0, wall0 = cpu_seconds(), time.perf_counter()
            counts = list(pool.map(demux, paths))
            runs.append(
                {"wall_s": time.perf_counter() - wall0, "cpu_s": cpu_seconds() - cpu0, "ok": counts == expected}
            )
    print(json.dumps({"runs": runs, "peak_rss_kib": peak_rss_kib()}))


def check_main(args):
    """Same work: pixels of each library against PyAV on a few frames.

    Prints one JSON line: per library, the mean and max of the per-frame mean
    absolute difference (grey levels) from PyAV, or why it could not run.
    torchcodec, which does not resize, is reported as not compared.
    """
    import numpy as np

    clips = read_clips(args)
    windows = make_items("window", clips, max(args.windows, 2))[:2]
    whole = make_items("whole", clips, 0)[0]  # the first 720p clip
    resized = make_items("resize", clips, 0)[0]  # the same clip, at 224x224
    pick = [0, whole.expected // 2, whole.expected - 1]

    def frames_of(load):
        out = [np.asarray(load(w)) for w in windows]
        for item in (whole, resized):
            full = np.asarray(load(item))
            out.append(full[pick] if len(full) == item.expected else full)
        return out

    loaders = {
        "pyav": lambda: pyav_loader(None),
        "spdl": lambda: spdl_loader(None),
        "torchcodec": lambda: torchcodec_loader("approximate", 1),
        "feedline": lambda: feedline_loader(None),
    }
    got, report = {}, {}
    for lib, make in loaders.items():
        try:
            got[lib] = frames_of(make())
        except Exception as e:
            report[lib] = {"error": _unavailable_reason(e)}
    reference = got.get("pyav")
    for lib, frames in got.items():
        if reference is None:
            report[lib] = {"error": "no PyAV reference"}
            continue
        if [f.shape for f in frames] != [r.shape for r in reference]:
            shapes = [tuple(f.shape) for f in frames]
            report[lib] = {"error": f"shapes {shapes} differ from PyAV's {[tuple(r.shape) for r in reference]}"}
            continue
        mads = [
            float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean())
            for f, r in zip(frames, reference)
            for a, b in zip(f, r)
        ]
        report[lib] = {"frames": len(mads), "mean": statistics.mean(mads), "max": max(mads)}
    print(json.dumps(report))


# -- parent side: data, workers, tables ----------------------------------------------


@dataclasses.dataclass
class Result:
    scenario: str
    config: Config
    frames_per_s: float | None = None
    cpu_ms_per_frame: float | None = None
    peak_rss_mib: float | None = None
    counts: list | None = None
    info: str = ""
    ok: bool = False
    note: str = ""  # why ok is False, or why there are no numbers
    skipped: bool = False  # unavailable: not a failure


def _common_args(args):
    cmd = ["--data", str(args.data), "--clips", str(args.clips), "--seconds", f"{args.seconds:g}"]
    cmd += ["--noise", str(args.noise), "--windows", str(args.windows), "--repeat", str(args.repeat)]
    cmd += ["--demux-opens", str(args.demux_opens)]
    return cmd + (["--quick-worker"] if args.quick else [])


def run_config(scenario, config, items, args):
    result = Result(scenario, config)
    if config.lib == "limit":
        report, result.note = run_limit(scenario, config, items, args, NUM_WORKERS)
    else:
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", f"{scenario}:{config.name}", *_common_args(args)]
        report, result.note = run_json(cmd, args.timeout, f"{scenario}:{config.name}")
    if report is None:
        return result
    if "unavailable" in report:
        result.skipped, result.note = True, report["unavailable"]
        return result
    runs = report["runs"]
    expected = sum(i.expected for i in items)
    result.frames_per_s = statistics.median(expected / r["wall_s"] for r in runs)
    result.cpu_ms_per_frame = statistics.median(r["cpu_s"] / max(r["frames"], 1) * 1e3 for r in runs)
    result.peak_rss_mib = report["peak_rss_kib"] / 1024
    result.counts = runs[0]["counts"]
    result.info = report.get("info", "")
    for r in runs:
        if r["items"] != len(items) or r["frames"] != expected or r["bad"]:
            result.note = f"got {r['frames']} of {expected} frames in {r['items']} of {len(items)} items"
            if r["bad"]:
                result.note += f", {r['bad']} wrong ({r['example']})"
            break
    result.ok = not result.note
    return result


def print_same_work(args):
    cmd = [sys.executable, os.path.abspath(__file__), "--check", *_common_args(args)]
    report, note = run_json(cmd, args.timeout, "check")
    if report is None:
        print(f"\nSame work: check failed ({note})")
        return []
    print("\nSame work: mean |pixel - PyAV's| per frame (grey levels) over 2 windows + frames 0, mid, last of a clip:")
    differ = []
    for lib in LIBS:
        r = report.get(lib)
        if r is None:
            continue
        if "error" in r:
            print(f"  {LIBS[lib]:10} not compared: {r['error']}")
            continue
        flag = ""
        if r["max"] > SAME_FRAME_MAD:
            flag = f"  DIFFERENT FRAMES (> {SAME_FRAME_MAD:g})"
            differ.append(lib)
        print(f"  {LIBS[lib]:10} {r['frames']} frames: mean {r['mean']:.2f}, worst frame {r['max']:.2f}{flag}")
    return differ


def run_demux(args):
    """The demux table; returns ({(name, threads): files/s}, [names that failed])."""
    wanted = args.only.split(",") if args.only else None
    demuxers = [d for d in DEMUXERS if wanted is None or d[1] in wanted or d[0] in wanted]
    threads = [int(t) for t in args.demux_threads.split(",")]
    rates, rows, failed = {}, [], []
    for name, _lib, label in demuxers:
        cells, cpu, note = [], [], ""
        for n in threads:
            print(f"  running demux:{name}:{n} ...", flush=True)
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", f"demux:{name}:{n}", *_common_args(args)]
            report, note = run_json(cmd, args.timeout, f"demux:{name}:{n}")
            if report is None or "unavailable" in report:
                note = note or f"n/a: {report['unavailable']}"
                break
            if not all(r["ok"] for r in report["runs"]):
                note = "NO: packet counts differ from the clips' frame counts"
                break
            rates[(name, n)] = statistics.median(args.demux_opens / r["wall_s"] for r in report["runs"])
            cells.append(rates[(name, n)])
            cpu.append(statistics.median(r["cpu_s"] / args.demux_opens * 1e3 for r in report["runs"]))
        if note.startswith("NO") or (report is None and not note.startswith("n/a")):
            failed.append(f"demux:{name}")
        rows.append((name, label, cells, cpu, note or "yes"))
    print(f"\nDemux throughput: {args.demux_opens} files per pass (video packets into memory), files/s")
    header = f"{'demuxer':16} " + " ".join(f"{f'{n} thr':>9}" for n in threads)
    print(f"{header}  {f'{threads[-1]}/{threads[0]}':>6}  CPU ms/file  packets ok  configuration")
    for name, label, cells, cpu, note in rows:
        shown = [f"{c:9,.1f}" for c in cells] + [f"{'-':>9}"] * (len(threads) - len(cells))
        scale = f"{cells[-1] / cells[0]:5.2f}x" if len(cells) == len(threads) else f"{'-':>6}"
        cpu_cell = f"{statistics.mean(cpu):11.2f}" if cpu else f"{'-':>11}"
        print(f"{name:16} {' '.join(shown)}  {scale}  {cpu_cell}  {note:10}  {label}")
    print("CPU ms/file: mean over the thread counts of the pool's user+sys per file.")
    return rates, failed


def _version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def describe_clips(entries):
    """Reads every clip once (into the page cache); returns summary lines."""
    lines = []
    for _, height in RESOLUTIONS:
        group = [e for e in entries if e["height"] == height]
        if not group:
            continue
        for e in group:
            with open(e["path"], "rb") as f:
                while f.read(1 << 20):
                    pass
        mbps = statistics.mean(e["bit_rate"] for e in group) / 1e6
        lines.append(
            f"  {len(group)} x {group[0]['width']}x{height}, {group[0]['frames']} frames each "
            f"({group[0]['frames'] / group[0]['fps']:g} s at {group[0]['fps']:g} fps), {mbps:.1f} Mbit/s, "
            f"keyframes per clip: {'/'.join(str(e['keyframes']) for e in group)}"
        )
    return lines


def print_header(args, entries):
    cpus = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cpus
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print("Video decoding: H.264 MP4 -> uint8 RGB arrays (N, H, W, 3), on 2 cores")
    window = f"[t, t + {WINDOW_FRAMES}/fps)"
    print(f"  whole clips, and windows of {WINDOW_FRAMES} frames {window} at random t (file opened per sample)")
    versions = ", ".join(f"{d} {_version(d)}" for d in ("feedline", "spdl", "av", "torchcodec", "torch", "numpy"))
    print(f"Python {platform.python_version()}, {versions}")
    print(f"CPUs: {cpus} ({usable} usable), load average at start: {load}")
    print(
        f"Clips: ffmpeg testsrc2 + noise=alls={args.noise}:allf=t, libx264 defaults (preset medium), "
        f"yuv420p, {FPS} fps, MP4;"
    )
    print(f"  {x264_settings(entries[0]['path'])}")
    for line in describe_clips(entries):
        print(line)
    print(f"Median of {args.repeat} timed pass(es) after a warm-up; each (scenario, configuration) in its own process.")
    print("CPU = user+sys of the worker and its children per frame; peak RSS = worker + largest child.")
    if args.configs == "best":
        print("--configs best: the two best-measured configurations of each baseline (BEST in this script);")
        print("  a library's rate is its best configuration's in this run. --configs all runs every one.")
    if args.quick:
        print("--quick: smoke run only; do not read the numbers.")


def _selection(args):
    """[(scenario, [Config])] to run."""
    scenarios = args.scenarios.split(",")
    unknown = [s for s in scenarios if s not in SCENARIOS]
    if unknown:
        sys.exit(f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}")
    scenarios = [s for s in scenarios if s in FRAME_SCENARIOS]
    wanted = args.only.split(",") if args.only else None
    if wanted:
        demuxers = [d[0] for d in DEMUXERS]
        bad = [w for w in wanted if w not in LIBS and w not in CONFIG_BY_NAME and w not in demuxers]
        if bad:
            choices = f"libraries ({', '.join(LIBS)}) or configurations ({', '.join(CONFIG_BY_NAME)})"
            sys.exit(f"unknown {', '.join(bad)}; choose {choices}")
    selection = []
    for scenario in scenarios:
        pool = CONFIGS if args.configs == "all" else [CONFIG_BY_NAME[n] for n in BEST[scenario]]
        if wanted:
            # A named configuration runs even when it is not among the best.
            pool = [c for c in CONFIGS if c.name in wanted or (c.lib in wanted and c in pool)]
        selection.append((scenario, pool))
    return selection


def parent_main(args):
    selection = _selection(args)
    entries = ensure_clips(args)
    print_header(args, entries)
    clips = read_clips(args)
    all_results, infos = [], {}
    for scenario, configs in selection:
        items = make_items(scenario, clips, args.windows)
        results = []
        for config in configs:
            print(f"  running {scenario}:{config.name} ...", flush=True)
            result = run_config(scenario, config, items, args)
            if result.info:
                infos[config.lib] = result.info
            results.append(result)
        print_table(scenario, results, items)
        print_counts_agree(scenario, results, items)
        print_gil(scenario, results)
        all_results.append((scenario, results))
    demux_rates, failed = ({}, [])
    if "demux" in args.scenarios.split(","):
        demux_rates, failed = run_demux(args)
    if infos:
        print("\nLibraries: " + "; ".join(infos[lib] for lib in LIBS if lib in infos))
    ratios = print_goals(all_results, args.quick) if all_results else {}
    differ = print_same_work(args) if all_results else []
    failed += [f"{s}:{r.config.name}" for s, rs in all_results for r in rs if not r.ok and not r.skipped]
    failed += [f"check:{lib}" for lib in differ]
    if failed:
        print("\nWrong or missing results: " + ", ".join(failed))
    print_summary(args, ratios, demux_rates, failed)
    return 1 if failed else 0


def print_summary(args, ratios, demux_rates, failed):
    """One line: feedline's defaults over the best baseline per scenario, and demux files/s."""
    parts = [f"{s} {'n/a' if r is None else f'{r:.2f}x'}" for s, r in ratios.items()]
    threads = [int(t) for t in args.demux_threads.split(",")]
    for name in ("feedline", "feedline-noprobe", "spdl", "pyav"):
        got = [f"{demux_rates[(name, n)]:,.0f}" for n in (threads[0], threads[-1]) if (name, n) in demux_rates]
        if len(got) == 2:
            parts.append(f"demux {name} {got[0]}->{got[1]} files/s ({threads[0]}->{threads[-1]} thr)")
    state = "FAILED " + ",".join(failed) if failed else "ok"
    quick = " (smoke run)" if args.quick else ""
    print(f"\nSUMMARY: video feedline defaults vs best baseline: {', '.join(parts) or 'nothing ran'}; {state}{quick}")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clips", type=int, default=4, help="clips per resolution (720p, 1080p)")
    p.add_argument("--seconds", type=float, default=2.0, help="length of each clip")
    p.add_argument("--noise", type=int, default=8, help="noise=alls=N of the clip generator (bit rate)")
    p.add_argument("--windows", type=int, default=64, help="window samples in the window scenario")
    p.add_argument("--repeat", type=int, default=3, help="timed passes per configuration (median is reported)")
    p.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated: " + ",".join(SCENARIOS))
    p.add_argument("--demux-opens", type=int, default=256, help="files demuxed per pass in the demux scenario")
    p.add_argument("--demux-threads", default="1,2,4,8", help="comma-separated thread counts for the demux scenario")
    p.add_argument("--configs", choices=("best", "all"), default="best", help="best per library, or all of them")
    p.add_argument("--only", help="comma-separated libraries or configurations (lib/variant)")
    p.add_argument("--quick", action="store_true", help="smoke run: 1+1 clips of 1 s, 4 windows, 1 repeat")
    p.add_argument("--data", default=str(DEFAULT_DATA), help="cache folder for the clips")
    p.add_argument("--limit-bin", default=str(LIMIT_BIN), help="the video_limit program (the bounds)")
    p.add_argument("--timeout", type=float, default=900, help="seconds before a worker is given up on")
    # Internal: run one configuration (or the pixel check) in this process.
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--check", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--quick-worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.clips, args.seconds, args.windows, args.repeat = 1, 1.0, 4, 1
        args.demux_opens, args.demux_threads = 16, "1,2"
    args.quick = args.quick or args.quick_worker
    try:
        bad_threads = any(int(t) < 1 for t in args.demux_threads.split(","))
    except ValueError:
        bad_threads = True
    if bad_threads or args.demux_opens < 1:
        p.error("--demux-threads must be positive integers and --demux-opens positive")
    if args.clips < 1 or args.repeat < 1 or args.windows < 1 or args.noise < 0:
        p.error("--clips, --repeat and --windows must be positive, --noise not negative")
    if args.seconds * FPS < WINDOW_FRAMES + 2:
        p.error(f"--seconds must give at least {WINDOW_FRAMES + 2} frames")
    return args


def main(argv=None):
    return dispatch(parse_args(argv), worker_main, parent_main, check_main)


if __name__ == "__main__":
    sys.exit(main())
