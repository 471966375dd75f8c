"""The Python soak run (`make soak-python`): many items through 4 native
stages of a pipeline built with feedline.pipeline, each item converted to a
Python int at the sink, to find leaks in the Python seam (conversion,
reference handling, the GIL hand-off) that short tests cannot see.

    python scripts/soak.py [--items N] [--sample N] [--warmup N] [--max-growth-mib M]

The ops come from the test extension (``make test-ext``; its directory is
found as the tests find it, or from $FEEDLINE_TEST_EXT_DIR). Checks the
count, the sum and that no stage failed; samples RSS every --sample items;
prints one line per sample and a summary line; exits with 1 on a lost or
duplicated item, a failure, or RSS growth above --max-growth-mib after the
warm-up.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(
    0, os.environ.get("FEEDLINE_TEST_EXT_DIR", str(ROOT / "build" / "pytest" / "tests" / "python" / "native"))
)

import _feedline_testing as testing  # noqa: E402

from feedline.pipeline import PipelineBuilder  # noqa: E402


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000_000)
    parser.add_argument("--sample", type=int, default=500_000)
    parser.add_argument("--warmup", type=int, default=1_000_000)
    parser.add_argument("--max-growth-mib", type=float, default=16.0)
    args = parser.parse_args()

    n = args.items
    pipeline = (
        PipelineBuilder()
        .add_source(testing.range_source(n))
        .pipe(testing.add(3))
        .pipe(testing.add(7), concurrency=2)
        .pipe(testing.add(-7), concurrency=2, output_order="input")
        .pipe(testing.add(-3))
        .add_sink(16)
        .build(num_threads=2)
    )
    start = last = time.perf_counter()
    count = total = 0
    first_rss = None
    rss = max_rss = rss_mib()
    with pipeline.auto_stop():
        for x in pipeline:
            total += x
            count += 1
            if count % args.sample == 0:
                now = time.perf_counter()
                rss = rss_mib()
                print(
                    f"soak.py: {count} items, RSS {rss:.1f} MiB, {args.sample / (now - last):.0f} items/s", flush=True
                )
                last = now
                if first_rss is None and count >= args.warmup:
                    first_rss = rss
                max_rss = max(max_rss, rss)
    seconds = time.perf_counter() - start
    failures = sum(s.failures for s in pipeline.stats().stages)
    first_rss = rss if first_rss is None else first_rss
    growth = rss - first_rss
    exact = total == n * (n - 1) // 2
    ok = count == n and exact and failures == 0 and growth <= args.max_growth_mib
    print(
        f"soak.py: {'ok' if ok else 'FAILED'}: {count} items through 4 stages in {seconds:.1f} s"
        f" ({count / seconds:.0f} items/s); RSS {first_rss:.1f} MiB after {args.warmup} items,"
        f" {rss:.1f} MiB at the end (max {max_rss:.1f}): growth {growth:+.1f} MiB;"
        f" {failures} failures; sum {'exact' if exact else 'WRONG'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
