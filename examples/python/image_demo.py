# SPDX-License-Identifier: Apache-2.0
"""The main job of `make demo`: an ImageNet-style loading epoch, GIL-free.

1. Makes a dataset (once; kept in build/demo-data): JPEGs of ImageNet-typical
   sizes (about 500x375, quality 90) cut from scikit-image's sample
   photographs with random crops, scales and flips.
2. Runs one epoch of the native pipeline
       paths -> read_file[4] -> aggregate(32) -> decode_batch[2] (shorter
       side 256, centre crop 224, CHW float32, ImageNet mean/std, each image
       decoded straight into its batch slot)
   with a progress line; only the finished (32, 3, 224, 224) batches reach
   Python.
3. Prints images/s, CPU-seconds per image, peak memory and the per-stage
   statistics table.

Run: python examples/python/image_demo.py [--images 2000] [--threads N]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import random
import resource
import subprocess
import sys
import time

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
PHOTOS = ["astronaut", "coffee", "chelsea", "rocket", "immunohistochemistry", "hubble_deep_field", "motorcycle_left"]


def make_dataset(root: pathlib.Path, count: int, seed: int = 0) -> list[str]:
    """Writes `count` JPEGs under `root` (reusing what is there)."""
    from PIL import Image
    from skimage import data

    root.mkdir(parents=True, exist_ok=True)
    paths = [root / f"{i:06d}.jpg" for i in range(count)]
    missing = [p for p in paths if not p.exists()]
    if not missing:
        return [str(p) for p in paths]
    rng = random.Random(seed)
    sources = []
    for name in PHOTOS:
        try:
            img = getattr(data, name)()
        except Exception:  # a sample that needs a download: skip it
            continue
        if img.ndim == 2:
            img = img[:, :, None].repeat(3, axis=2)
        sources.append(Image.fromarray(img[:, :, :3]).convert("RGB"))
    print(f"making {len(missing)} JPEGs in {root} from {len(sources)} photographs ...", flush=True)
    for path in missing:
        src = rng.choice(sources)
        w, h = src.size
        # A random crop of 60-100% of the photo, scaled to ImageNet-like size.
        cw, ch = int(w * rng.uniform(0.6, 1.0)), int(h * rng.uniform(0.6, 1.0))
        x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
        img = src.crop((x, y, x + cw, y + ch))
        tw = rng.choice([500, 500, 500, 375, 450, 640])
        th = max(1, int(tw * rng.uniform(0.66, 1.0)))
        img = img.resize((tw, th), Image.BILINEAR)
        if rng.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        img.save(path, quality=90)
    return [str(p) for p in paths]


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--data", default="build/demo-data")
    ap.add_argument("--make-data-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.make_data_only:
        make_dataset(pathlib.Path(args.data), args.images)
        return 0
    # The dataset is made in a child process, so that Pillow and scikit-image
    # do not count in this process's peak memory.
    subprocess.run(
        [sys.executable, __file__, "--make-data-only", "--images", str(args.images), "--data", args.data],
        check=True,
    )
    paths = [str(pathlib.Path(args.data) / f"{i:06d}.jpg") for i in range(args.images)]

    from feedline.io import ops
    from feedline.pipeline import PipelineBuilder

    threads = max(2, args.threads)
    pipeline = (
        PipelineBuilder()
        .add_source(paths)
        .pipe(ops.read_file(), concurrency=4)
        .aggregate(args.batch)
        .pipe(
            ops.decode_batch(resize_shorter=256, crop=224, layout="CHW", dtype="float32", mean=MEAN, std=STD),
            concurrency=threads,
        )
        .add_sink(3)
        .build(num_threads=threads)
    )
    usage0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    seen = 0
    with pipeline.auto_stop():
        for batch in pipeline:
            seen += batch.shape[0]
            rate = seen / (time.perf_counter() - t0)
            print(f"\r  {seen}/{len(paths)} images, {rate:,.0f} images/s, last batch {batch}", end="", flush=True)
    elapsed = time.perf_counter() - t0
    usage1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)
    print()
    print(f"images:        {seen} of {len(paths)} in {elapsed:.2f} s")
    print(f"throughput:    {seen / elapsed:,.0f} images/s ({threads} threads)")
    print(f"CPU per image: {cpu / max(seen, 1) * 1e3:.2f} ms")
    print(f"peak RSS:      {peak_rss_mib():.0f} MiB")
    print()
    print(pipeline.stats().format_table())
    return 0 if seen == len(paths) else 1


if __name__ == "__main__":
    sys.exit(main())
