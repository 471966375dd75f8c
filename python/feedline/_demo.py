"""``python -m feedline demo``: the README's image-loading demo for an
installed package (no repository, no extra packages).

1. Makes a dataset in a temporary directory (or ``--data DIR``, kept and
   reused): ``--images`` JPEGs of 500x375 made by the ``ffmpeg`` CLI from
   its ``testsrc2`` pattern when ``ffmpeg`` is on PATH, otherwise PNGs
   written here with zlib from NumPy patterns (``--format`` picks one).
2. Runs one epoch of the native pipeline
       paths -> read_file[4] -> aggregate(batch) -> decode_batch[threads]
   (shorter side 256, centre crop 224, CHW float32, ImageNet mean/std); only
   finished batches reach Python.
3. Prints images/s, CPU per image, peak memory and the per-stage statistics.

``make demo`` (examples/python/image_demo.py in the repository) runs the same
pipeline on JPEGs cut from scikit-image's photographs.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
WIDTH, HEIGHT = 500, 375


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--images", type=int, default=2000, help="images in the dataset (default 2000)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2, help="decode threads")
    ap.add_argument("--batch", type=int, default=32, help="images per batch")
    ap.add_argument("--data", help="directory for the dataset, kept and reused (default: a temporary one)")
    ap.add_argument(
        "--format",
        choices=("auto", "jpeg", "png"),
        default="auto",
        help="jpeg needs the ffmpeg CLI; auto: jpeg if ffmpeg is on PATH, else png",
    )


def make_jpegs(root: pathlib.Path, count: int) -> list[pathlib.Path]:
    """`count` JPEGs (quality about 90) of FFmpeg's testsrc2 pattern, one
    ffmpeg run."""
    paths = [root / f"{i:06d}.jpg" for i in range(count)]
    if all(p.exists() for p in paths):
        return paths
    subprocess.run(
        ["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi"]
        + ["-i", f"testsrc2=size={WIDTH}x{HEIGHT}:rate=25", "-frames:v", str(count)]
        + ["-q:v", "3", "-start_number", "0", str(root / "%06d.jpg")],
        check=True,
    )
    return paths


def png_bytes(rgb) -> bytes:  # rgb: (H, W, 3) uint8 array
    """A PNG file of `rgb` (8-bit RGB, no filter, zlib level 1)."""
    h, w, _ = rgb.shape

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    import numpy as np

    rows = np.concatenate([np.zeros((h, 1), np.uint8), rgb.reshape(h, w * 3)], axis=1)
    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows.tobytes(), 1))
        + chunk(b"IEND", b"")
    )


def make_pngs(root: pathlib.Path, count: int) -> list[pathlib.Path]:
    """`count` PNGs: gradients and a moving disc, different in each."""
    import numpy as np

    paths = [root / f"{i:06d}.png" for i in range(count)]
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH]
    for i, path in enumerate(paths):
        if path.exists():
            continue
        cx, cy = (37 * i) % WIDTH, (23 * i) % HEIGHT
        disc = ((x - cx) ** 2 + (y - cy) ** 2 < 60**2) * 255
        rgb = np.stack([(x + 3 * i) % 256, (y + 5 * i) % 256, disc], axis=-1).astype(np.uint8)
        path.write_bytes(png_bytes(rgb))
    return paths


def make_dataset(root: pathlib.Path, count: int, fmt: str) -> tuple[list[str], str]:
    """The dataset's paths and a description of it."""
    root.mkdir(parents=True, exist_ok=True)
    if fmt == "auto":
        fmt = "jpeg" if shutil.which("ffmpeg") else "png"
    if fmt == "jpeg":
        if not shutil.which("ffmpeg"):
            raise SystemExit("--format jpeg needs the ffmpeg CLI on PATH")
        paths, what = make_jpegs(root, count), "JPEGs made by the ffmpeg CLI"
    else:
        paths, what = make_pngs(root, count), "PNGs"
    return [str(p) for p in paths], f"{count} {WIDTH}x{HEIGHT} {what}"


def run_epoch(paths: list[str], threads: int, batch: int) -> int:
    """One epoch of the pipeline over `paths`, with the summary printed;
    returns the number of images loaded."""
    from feedline.io import ops
    from feedline.pipeline import PipelineBuilder

    threads = max(2, threads)
    pipeline = (
        PipelineBuilder()
        .add_source(paths)
        .pipe(ops.read_file(), concurrency=4)
        .aggregate(batch)
        .pipe(
            ops.decode_batch(resize_shorter=256, crop=224, layout="CHW", dtype="float32", mean=MEAN, std=STD),
            concurrency=threads,
        )
        .add_sink(3)
        .build(num_threads=threads)
    )
    progress = sys.stdout.isatty()
    usage0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    seen = 0
    with pipeline.auto_stop():
        for item in pipeline:
            seen += item.shape[0]
            if progress:
                rate = seen / (time.perf_counter() - t0)
                print(f"\r  {seen}/{len(paths)} images, {rate:,.0f} images/s, last batch {item}", end="", flush=True)
    elapsed = time.perf_counter() - t0
    usage1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)
    if progress:
        print()
    print(f"images:        {seen} of {len(paths)} in {elapsed:.2f} s")
    print(f"throughput:    {seen / elapsed:,.0f} images/s ({threads} threads)")
    print(f"CPU per image: {cpu / max(seen, 1) * 1e3:.2f} ms")
    print(f"peak RSS:      {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    print()
    print(pipeline.stats().format_table())
    return seen


def run(args: argparse.Namespace) -> int:
    if args.images < 1 or args.batch < 1:
        raise SystemExit("--images and --batch must be at least 1")
    with tempfile.TemporaryDirectory(prefix="feedline-demo-") as tmp:
        root = pathlib.Path(args.data) if args.data else pathlib.Path(tmp)
        paths, what = make_dataset(root, args.images, args.format)
        print(f"dataset:       {what} in {root}", flush=True)
        seen = run_epoch(paths, args.threads, args.batch)
    return 0 if seen == len(paths) else 1
