# SPDX-License-Identifier: Apache-2.0
"""PNG decoding: feedline.io against Pillow and SPDL.

What is measured, on 2 cores, each contender in its own process (this
script with ``--worker NAME``, which prints one JSON line): ``--images``
PNG files held in memory as ``bytes``, decoded to uint8 RGB arrays of
shape (H, W, 3) on a ``ThreadPoolExecutor`` of 2 threads. The files are
scikit-image's sample photographs (RGB, up to 512x512), saved as PNG by
the two writers a dataset is most likely to come from:

- ``pillow``: ``Image.save(format="PNG")`` (adaptive filters, zlib level 6);
- ``ffmpeg``: the ``ffmpeg`` CLI's PNG encoder (``-pred mixed``).

The contenders:

- ``feedline``: ``numpy.asarray(feedline.io.decode_image(data))`` (an 8-bit
  RGB or greyscale PNG without colour chunks is inflated by libdeflate and
  unfiltered in place; every other PNG goes through libpng);
- ``pillow``: ``numpy.asarray(Image.open(BytesIO(data)).convert("RGB"))``;
- ``spdl``: ``spdl.io.to_numpy(spdl.io.load_image(data))`` (FFmpeg's PNG
  decoder).

Images/s is the median of ``--repeat`` timed passes over all files after a
warm-up; CPU is the worker's user+sys per image; peak RSS its
``ru_maxrss``. Every contender's arrays are checked against the photographs
(PNG is lossless: they must be equal).

The script ends with one line::

    PNG decode feedline/Pillow X.XX  feedline/SPDL Y.YY

Run::

    python bench/python/png.py                  # 200 images of each writer
    python bench/python/png.py --quick          # smoke run
    python bench/python/png.py --only feedline,pillow
"""

from __future__ import annotations

import argparse
import concurrent.futures
import importlib.util
import json
import pathlib
import statistics
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import benchlib  # noqa: E402

THREADS = 2
CONTENDERS = ["feedline", "pillow", "spdl"]
LABELS = {
    "feedline": "feedline (decode_image)",
    "pillow": "Pillow (Image.open + convert)",
    "spdl": "SPDL 0.8 (load_image, FFmpeg)",
}
NEEDS = {"pillow": "PIL", "spdl": "spdl"}


def _pillow_png(img) -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="PNG")
    return buf.getvalue()


def _ffmpeg_png(img) -> bytes:
    h, w, _ = img.shape
    return subprocess.run(
        ["ffmpeg", "-v", "error", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{w}x{h}", "-i", "-",
         "-c:v", "png", "-pred", "mixed", "-frames:v", "1", "-f", "image2pipe", "-"],
        input=img.tobytes(), check=True, capture_output=True,
    ).stdout  # fmt: skip


def files(n: int):
    """(writer, photo, PNG bytes) for n photographs from each writer."""
    photos = benchlib.photos(n)
    distinct = {id(p): p for p in photos}
    encoded = {}
    for key, img in distinct.items():
        encoded[("pillow", key)] = _pillow_png(img)
        encoded[("ffmpeg", key)] = _ffmpeg_png(img)
    return [(w, p, encoded[(w, id(p))]) for w in ("pillow", "ffmpeg") for p in photos]


def _decoder(name):
    import io

    import numpy as np

    if name == "feedline":
        import feedline.io as fio

        return lambda data: np.asarray(fio.decode_image(data))
    if name == "pillow":
        from PIL import Image

        return lambda data: np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    import spdl.io

    return lambda data: spdl.io.to_numpy(spdl.io.load_image(data))


def worker_main(name, args):
    import numpy as np

    items = files(args.images)
    decode = _decoder(name)
    blobs = [data for _, _, data in items]
    with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(decode, blobs[:8]))  # warm-up
        times, cpus = [], []
        for _ in range(args.repeat):
            c0, t0 = benchlib.cpu_seconds(), time.perf_counter()
            arrays = list(pool.map(decode, blobs))
            times.append(time.perf_counter() - t0)
            cpus.append(benchlib.cpu_seconds() - c0)
    wrong = sum(not np.array_equal(a, p) for a, (_, p, _) in zip(arrays, items))
    seconds = statistics.median(times)
    print(
        json.dumps(
            {
                "name": name,
                "items": len(items),
                "rate": len(items) / seconds,
                "cpu_ms": 1000 * statistics.median(cpus) / len(items),
                "rss_mib": benchlib.peak_rss_kib() / 1024,
                "error": f"{wrong} arrays differ from the photographs" if wrong else "",
            }
        )
    )


def parent_main(args):
    wanted = args.only.split(",") if args.only else CONTENDERS
    results = {}
    for name in wanted:
        module = NEEDS.get(name)
        if module and importlib.util.find_spec(module) is None:
            print(f"{name}: skipped ({module} is not installed)")
            continue
        cmd = [sys.executable, __file__, "--worker", name, "--images", str(args.images), "--repeat", str(args.repeat)]
        out, note = benchlib.run_json(cmd, timeout=1800, label=name)
        if out is None:
            print(f"{name}: {note}")
            continue
        results[name] = out
    if not results:
        print("\nPNG decode feedline/Pillow n/a  feedline/SPDL n/a")
        return 1
    first = next(iter(results.values()))
    print(f"\nPNG decode ({first['items']} files, half from Pillow, half from ffmpeg; median of {args.repeat})")
    print("| contender | images/s | vs Pillow | vs SPDL | CPU ms/image | peak RSS MiB | check |")
    print("|---|---:|---:|---:|---:|---:|---|")
    failed = False

    def ratio(a, b):
        return f"{results[a]['rate'] / results[b]['rate']:.2f}" if a in results and b in results else "n/a"

    for name, r in results.items():
        failed = failed or bool(r["error"])
        cells = f"{r['rate']:,.0f} | {ratio(name, 'pillow')} | {ratio(name, 'spdl')} | {r['cpu_ms']:.2f} | {r['rss_mib']:.0f}"
        print(f"| {LABELS[name]} | {cells} | {r['error'] or 'ok'} |")
    print(f"\nPNG decode feedline/Pillow {ratio('feedline', 'pillow')}  feedline/SPDL {ratio('feedline', 'spdl')}")
    return 1 if failed else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--images", type=int, default=200, help="photographs per PNG writer")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--only", default="", help="comma-separated: " + ",".join(CONTENDERS))
    p.add_argument("--quick", action="store_true", help="a smoke run: few images, one repeat")
    p.add_argument("--worker", default="")
    args = p.parse_args()
    if args.quick:
        args.images, args.repeat = 6, 1
    return benchlib.dispatch(args, worker_main, parent_main)


if __name__ == "__main__":
    sys.exit(main())
