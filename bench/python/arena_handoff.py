# SPDX-License-Identifier: Apache-2.0
"""Hand-off of large NumPy arrays from a spawned worker process to its parent.

    python bench/python/arena_handoff.py [--quick] [--sizes 1 4 16] [--items N] [--rounds 3]

Contenders, each in the same run, each with its own spawned worker, a bounded
queue of 4 items between the two, and the same consumer (which checks the
item's stamp and reads one byte per 4 KiB page, so that every contender's
data really reaches the parent's memory; with ``--read-all`` it copies
every byte into a buffer of its own, as a collate would):

- ``mp.Queue``: the array pickled through ``multiprocessing.Queue``;
- ``feedline pool``: ``feedline.pipeline.iterate_in_subprocess(...,
  arena=SharedMemorySegmentPool(...))`` (forkserver worker): the array copied
  once into a shared segment in the worker, a small envelope through the
  queue, a zero-copy view in the parent;
- ``spdl pool``: SPDL's ``iterate_in_subprocess(..., arena=
  SharedMemorySegmentPool(...))`` when ``spdl`` is importable (its worker
  starts with the default start method: SPDL's pool makes its lock in the
  default context, which a spawned worker refuses);
- ``feedline ring`` and ``spdl ring``: the same with
  ``SharedMemoryRingBuffer`` (a byte ring the parent copies out of) of
  ``QUEUE_ITEMS + 2`` items.

The worker sends ``items`` arrays after 2 warm-up ones (not timed, they
include the process start) from 8 rotating buffers; by default 2 GiB a
size (2,048 arrays of 1 MiB, 128 of 16 MiB): with 512 MiB, 16 MiB timed
32 items, about 50 ms, and the ratios moved by half between runs. Each
contender runs ``rounds`` times (3), the rounds alternating the contenders,
and keeps its median: single runs on 2 cores still moved by a third. Prints
GB/s per size and contender; run() returns them as {size_mib: {contender:
GB/s}}.
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing
import statistics
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

WARMUP = 2
BUFFERS = 8
QUEUE_ITEMS = 4
PAGE = 4096


def _buffers(size: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.integers(0, 256, size, dtype=np.uint8) for _ in range(BUFFERS)]


def _stamped(buffers: list[np.ndarray], i: int) -> np.ndarray:
    a = buffers[i % BUFFERS]
    a[:8] = np.frombuffer(i.to_bytes(8, "little"), np.uint8)
    return a


# With --read-all the consumer copies every byte into a buffer of its own
# (as a collate or a host-to-device copy would) instead of one a page.
_read_all = False
_scratch: dict[int, np.ndarray] = {}


def _consume(arr: Any, i: int) -> int:
    arr = np.asarray(arr)
    if int.from_bytes(arr[:8].tobytes(), "little") != i:
        raise AssertionError(f"item {i} arrived with stamp {arr[:8].tobytes()!r}")
    if _read_all:
        np.copyto(_scratch.setdefault(arr.size, np.empty_like(arr)), arr)
        return 0
    return int(arr[::PAGE].sum())


def _queue_worker(size: int, n: int, out: Any) -> None:
    buffers = _buffers(size)
    for i in range(n):
        out.put(_stamped(buffers, i))


def _spdl_source(size: int, n: int) -> Iterator[np.ndarray]:
    buffers = _buffers(size)
    for i in range(n):
        yield _stamped(buffers, i)


def _timed(stream: Iterator[Any], size: int, items: int) -> float:
    """Consumes WARMUP + items arrays; returns GB/s over the last `items`."""
    for i in range(WARMUP):
        _consume(next(stream), i)
    start = time.perf_counter()
    for i in range(WARMUP, WARMUP + items):
        _consume(next(stream), i)
    return items * size / (time.perf_counter() - start) / 1e9


def _via_queue(size: int, items: int) -> float:
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue(QUEUE_ITEMS)
    p = ctx.Process(target=_queue_worker, args=(size, WARMUP + items, out))
    p.start()
    try:
        return _timed((out.get() for _ in iter(int, 1)), size, items)
    finally:
        p.join()


def _via_feedline(size: int, items: int, ring: bool = False) -> float:
    from feedline.pipeline import SharedMemoryRingBuffer, SharedMemorySegmentPool, iterate_in_subprocess

    pool: Any = (
        SharedMemoryRingBuffer((size + PAGE) * (QUEUE_ITEMS + 2))
        if ring
        else SharedMemorySegmentPool(size + PAGE, QUEUE_ITEMS + 2)
    )
    src = iterate_in_subprocess(
        functools.partial(_spdl_source, size, WARMUP + items), buffer_size=QUEUE_ITEMS, arena=pool
    )
    try:
        return _timed(iter(src), size, items)
    finally:
        del src
        pool.close()


def _via_spdl(size: int, items: int, ring: bool = False) -> float | None:
    try:
        from spdl.pipeline import SharedMemorySegmentPool, iterate_in_subprocess
    except ImportError:
        return None
    if ring:
        from spdl.pipeline import SharedMemoryRingBuffer

        arena: Any = SharedMemoryRingBuffer((size + PAGE) * (QUEUE_ITEMS + 2))
    else:
        arena = SharedMemorySegmentPool(size + PAGE, QUEUE_ITEMS + 2)
    src = iterate_in_subprocess(
        functools.partial(_spdl_source, size, WARMUP + items),
        buffer_size=QUEUE_ITEMS,
        # SPDL's pool makes its Condition in the default context, which must
        # then be the worker's too (fork on Linux before Python 3.14).
        mp_context=None,
        arena=arena,
    )
    return _timed(iter(src), size, items)


CONTENDERS = {
    "mp.Queue": _via_queue,
    "feedline pool": _via_feedline,
    "spdl pool": _via_spdl,
    "feedline ring": functools.partial(_via_feedline, ring=True),
    "spdl ring": functools.partial(_via_spdl, ring=True),
}


def run(
    sizes_mib: tuple[int, ...] = (1, 4, 16), items: int | None = None, rounds: int = 3
) -> dict[int, dict[str, float | None]]:
    """Measures every contender at each size, ``rounds`` times; returns
    {size_mib: {name: median GB/s}} (None where a contender is not
    installed) and prints a table."""
    results: dict[int, dict[str, float | None]] = {}
    print(
        f"{'MiB':>4} {'items':>6} " + " ".join(f"{c:>14}" for c in CONTENDERS) + "   pool/queue  pool/spdl  ring/spdl"
    )
    for mib in sizes_mib:
        size = mib << 20
        n = items if items is not None else max(64, 2048 // mib)
        # Rounds alternate the contenders, so that a slow spell of the
        # machine falls on all of them; each keeps its median.
        runs: dict[str, list[float]] = {name: [] for name in CONTENDERS}
        for _ in range(rounds):
            for name, fn in CONTENDERS.items():
                v = fn(size, n)
                if v is not None:
                    runs[name].append(v)
        row = {name: statistics.median(v) if v else None for name, v in runs.items()}
        results[mib] = row
        cells = " ".join(f"{'n/a' if v is None else f'{v:.2f} GB/s':>14}" for v in row.values())
        pool, queue, spdl = row["feedline pool"], row["mp.Queue"], row["spdl pool"]
        vs_queue = f"{pool / queue:.2f}x" if pool and queue else "n/a"
        vs_spdl = f"{pool / spdl:.2f}x" if pool and spdl else "n/a"
        ring, spdl_ring = row["feedline ring"], row["spdl ring"]
        ring_vs = f"{ring / spdl_ring:.2f}x" if ring and spdl_ring else "n/a"
        print(f"{mib:>4} {n:>6} {cells}   {vs_queue:>10} {vs_spdl:>10} {ring_vs:>10}", flush=True)
    worst_queue = min((r["feedline pool"] or 0) / r["mp.Queue"] for r in results.values() if r["mp.Queue"])
    spdl = [(r["feedline pool"] or 0) / r["spdl pool"] for r in results.values() if r["spdl pool"]]
    rings = [(r["feedline ring"] or 0) / r["spdl ring"] for r in results.values() if r["spdl ring"]]
    print(
        f"SUMMARY: feedline pool vs mp.Queue >= {worst_queue:.2f}x at every size (goal >= 3x); vs SPDL's pool "
        + (f">= {min(spdl):.2f}x (goal >= 1.5x)" if spdl else "n/a (spdl not installed)")
        + "; feedline ring vs SPDL's ring "
        + (f">= {min(rings):.2f}x" if rings else "n/a")
    )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="few items (< 15 s)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16], help="array sizes in MiB")
    parser.add_argument("--items", type=int, default=None, help="timed items per size")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each contender (median kept)")
    parser.add_argument("--read-all", action="store_true", help="the consumer copies every byte, not one a page")
    args = parser.parse_args()
    global _read_all
    _read_all = args.read_all
    items = args.items if args.items is not None else (8 if args.quick else None)
    run(tuple(args.sizes), items, 1 if args.quick else args.rounds)


if __name__ == "__main__":
    main()
