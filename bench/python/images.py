# SPDX-License-Identifier: Apache-2.0
"""ImageNet-style image loading: feedline against the loaders users would pick.

What is measured: images per second for one epoch over a folder of JPEGs
(made by ``examples/python/image_demo.py``: ImageNet-like photographs, about
500x375, quality 90), on 2 cores. Every contender does the same work and ends
with the same thing in Python: torch tensors of shape (32, 3, 224, 224),
float32, CHW, normalised with the ImageNet mean/std, from
Resize(shorter side 256, bilinear) + CenterCrop(224), with 2 threads or
2 worker processes. The contenders:

- ``feedline``: the native pipeline of ``examples/python/image_demo.py``:
  ``add_source(paths) -> ops.read_file() [4] -> aggregate(32) ->
  ops.decode_batch(resize_shorter=256, crop=224, layout="CHW", dtype="float32",
  mean, std) [2] -> add_sink(3)``, ``build(num_threads=2)``: each batch is
  decoded straight into its Buffer. ``feedline-per-image`` instead decodes
  each image on its own (``ops.decode_image() [2] -> aggregate(32) ->
  ops.stack()``, one copy per image, per-image failure counts). No stage takes the
  GIL; each batch reaches Python once and becomes a tensor through
  ``feedline.io.to_torch`` (DLPack, no copy). libjpeg-turbo decodes at the
  smallest DCT scale that still covers the target (6/8 for a 500x375 photo)
  and the resize computes only the pixels inside the crop.
- ``feedline-pillow``: ``feedline.pipeline.PipelineBuilder`` with Python ops:
  the Pillow transform below at concurrency 2, ``aggregate(32)``, then a
  Python op doing ``torch.from_numpy(np.stack(images))``.
- ``dataloader``: ``torch.utils.data.DataLoader(dataset, batch_size=32,
  num_workers=2)`` (persistent_workers=False, default collate) over a map-style
  dataset whose ``__getitem__`` runs the Pillow transform and returns
  ``torch.from_numpy(...)``. Worker start-up is inside every timed epoch: it
  is what users pay per epoch.
- ``spdl``: ``spdl.pipeline.PipelineBuilder`` with one Python op per image,
  ``spdl.io.load_image(path, filter_desc=spdl.io.get_video_filter_desc(
  scale_width=256, scale_height=256, scale_mode="crop", crop_width=224,
  crop_height=224, scale_algo="bilinear"))`` (FFmpeg decode + swscale), then
  the same numpy normalisation to float CHW, at concurrency 2;
  ``aggregate(32)``; the same stacking op; ``build(num_threads=2)``.
- ``limit``: ``build/release/bench/cpp/image_limit 2``: two C++ threads,
  each taking every second path, doing ``read_file`` + ``decode_image`` with
  the same options in a plain loop (no pipeline, no batching, no Python).
  Bare libjpeg-turbo decode + resize on each core, summed: the machine's
  limit for this decoder. It warms up on a full pass, not on a subset.
  Build it with ``cmake --build build/release --target image_limit``.
- ``rrc-limit``: the same program with ``--rrc``: the RRC contenders'
  transform (random resized crop to 224x224 with partial decoding, flip
  with probability 0.5, seed 0 and each image keyed by its position in the
  list) in the same plain loop: the limit of the augmentation table.

The Pillow transform (feedline-pillow, dataloader) is what torchvision's
``Resize(256) + CenterCrop(224) + ToTensor() + Normalize()`` does with the
PIL backend (torchvision itself does not install beside this torch):
``Image.open(path).convert("RGB")``, ``resize((w, h), BILINEAR)`` with the
shorter side 256 and the longer side truncated, ``crop`` at
``round((size - 224) / 2)``, then ``(x / 255 - mean) / std`` in numpy and a
transpose to CHW. Pillow decodes at full size (``resize`` does not call
``draft()``, nor does torchvision).

Where the work is not identical (the script measures how far apart the
outputs are, see "same work" below the table):

- feedline decodes at a reduced DCT scale (n/8) before its antialiased
  triangle-filter resize. Its output differs from Pillow's by a few grey
  levels on average; with ``dct_scaling=False`` it is within one grey level,
  so the difference comes from decoding at reduced scale (the check below
  shows both).
- SPDL: FFmpeg's mjpeg decoder at full size, then swscale. swscale's
  ``bilinear`` is not Pillow's filter and it converts YUV to RGB itself, so
  pixels differ by a few grey levels. ``force_original_aspect_ratio=increase``
  sizes the longer side by rounding where torchvision truncates, and the
  centre crop goes 256x256 first and then 224x224, so the crop may sit one
  pixel off. FFmpeg could decode at reduced size (the mjpeg decoder's
  ``lowres`` option) but that is not SPDL's documented path, so it is not used.

How it is measured (docs: the project's design notes on benchmarking): each
contender runs in its own process (this script with ``--worker NAME``, which
prints one JSON line), after the parent has read every file once so that all
of them read from the page cache. A worker warms up on the first
min(N, 256) images, then runs ``--repeat`` timed epochs (default 3); the
median is reported. A timed epoch covers building, starting, draining and
stopping the pipeline (or DataLoader). CPU time is user+sys of the worker and
its children (the DataLoader's worker processes, reaped at the end of each
epoch) from ``resource.getrusage``; peak RSS is ``ru_maxrss`` of the worker
plus that of its largest child (forked DataLoader workers share pages with
their parent, so for the DataLoader this over-counts). "images ok" checks
that every timed epoch delivered exactly N images in (b, 3, 224, 224)
float32 tensors; a contender that drops images has not won, and the script
exits 1.

Goals for ``feedline`` (native ops): >= 4x the PyTorch DataLoader's images/s,
>= 2.5x SPDL's, >= 85% of the limit, and CPU-seconds per image <= 0.5x the
DataLoader's.

Run::

    python bench/python/images.py                 # 2000 images, median of 3
    python bench/python/images.py --quick         # smoke run, ~30 s, 64 images
    python bench/python/images.py --images 500 --repeat 5
    python bench/python/images.py --only feedline,spdl,limit
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import cpu_seconds, dispatch, peak_rss_kib, run_json
from images_report import Result, dist_version, fill_result, print_goals, print_rrc_goals, print_table

REPO = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_DATA = REPO / "build" / "demo-data"
DEFAULT_LIMIT_BIN = REPO / "build" / "release" / "bench" / "cpp" / "image_limit"
MAKE_DATA = REPO / "examples" / "python" / "image_demo.py"

NUM_THREADS = 2
BATCH = 32
RESIZE_SHORTER = 256
CROP = 224
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
WARMUP_IMAGES = 256


@dataclasses.dataclass(frozen=True)
class Contender:
    name: str
    label: str


CONTENDERS = [
    Contender("feedline", "feedline, native ops"),
    Contender("feedline-per-image", "feedline, native per-image + stack"),
    Contender("feedline-pillow", "feedline, Pillow in Python ops"),
    Contender("dataloader", "PyTorch DataLoader + Pillow"),
    Contender("spdl", "SPDL + spdl.io"),
    Contender("limit", "limit: bare decode loop (C++)"),
    # Training augmentation: RandomResizedCrop(224) + RandomHorizontalFlip.
    Contender("rrc-feedline", "RRC feedline, native (partial decode)"),
    Contender("rrc-no-partial", "RRC feedline, whole image at DCT scale"),
    Contender("rrc-full-decode", "RRC feedline, full decode then crop"),
    Contender("rrc-dataloader", "RRC DataLoader + Pillow"),
    Contender("rrc-spdl", "RRC SPDL + Pillow augmentation"),
    Contender("rrc-limit", "RRC limit: bare decode loop (C++)"),
    Contender("rrc-prepared", "RRC feedline, prepared JPEGs"),
    Contender("rrc-dataloader-prepared", "RRC DataLoader + Pillow, prepared JPEGs"),
    Contender("rrc-limit-prepared", "RRC limit, prepared JPEGs (C++)"),
]
RRC_CONTENDERS = [c.name for c in CONTENDERS if c.name.startswith("rrc-")]
PREPARED_CONTENDERS = [c.name for c in CONTENDERS if c.name.endswith("-prepared")]
BY_NAME = {c.name: c for c in CONTENDERS}


# -- the per-image transforms ---------------------------------------------------


def _normalise_hwc(hwc_u8):
    """uint8 HWC -> float32 CHW, (x / 255 - mean) / std, as ToTensor + Normalize."""
    import numpy as np

    # One multiply-add per element instead of three passes (/255, -mean, /std).
    scale = np.asarray([1 / (255 * s) for s in STD], dtype=np.float32)
    bias = np.asarray([-m / s for m, s in zip(MEAN, STD)], dtype=np.float32)
    return np.ascontiguousarray((hwc_u8 * scale + bias).transpose(2, 0, 1))


def _resized_size(width, height):
    # torchvision's Resize(int): the shorter side becomes 256, the longer one
    # keeps the aspect ratio and is truncated, not rounded.
    if width <= height:
        return RESIZE_SHORTER, int(RESIZE_SHORTER * height / width)
    return int(RESIZE_SHORTER * width / height), RESIZE_SHORTER


def pillow_imagenet(path):
    """The Pillow version of Resize(256) + CenterCrop(224) + ToTensor + Normalize."""
    import numpy as np
    from PIL import Image

    with Image.open(path) as img:
        img = img.convert("RGB")  # as torchvision's pil_loader
    width, height = _resized_size(*img.size)
    img = img.resize((width, height), Image.BILINEAR)
    # torchvision's CenterCrop: round() rounds half to even, as Python's does.
    left, top = int(round((width - CROP) / 2)), int(round((height - CROP) / 2))
    img = img.crop((left, top, left + CROP, top + CROP))
    return _normalise_hwc(np.asarray(img))


def _spdl_filter_desc():
    import spdl.io

    # SPDL's documented helper: scale to cover 256x256 keeping the aspect
    # ratio (shorter side 256), centre-crop 256x256, then 224x224.
    return spdl.io.get_video_filter_desc(
        scale_width=RESIZE_SHORTER,
        scale_height=RESIZE_SHORTER,
        scale_mode="crop",
        crop_width=CROP,
        crop_height=CROP,
        scale_algo="bilinear",
    )


def make_spdl_imagenet():
    import spdl.io

    filter_desc = _spdl_filter_desc()

    def spdl_imagenet(path):
        hwc = spdl.io.to_numpy(spdl.io.load_image(path, filter_desc=filter_desc))
        return _normalise_hwc(hwc)

    return spdl_imagenet


# -- training augmentation -------------------------------------------------------

RRC_SCALE = (0.08, 1.0)
RRC_RATIO = (3.0 / 4.0, 4.0 / 3.0)


def rrc_params(width, height, uniform):
    """torchvision's RandomResizedCrop.get_params, drawing from uniform()."""
    import math

    area = width * height
    log_lo, log_hi = math.log(RRC_RATIO[0]), math.log(RRC_RATIO[1])
    for _ in range(10):
        target_area = area * (RRC_SCALE[0] + (RRC_SCALE[1] - RRC_SCALE[0]) * uniform())
        aspect = math.exp(log_lo + (log_hi - log_lo) * uniform())
        w = int(round(math.sqrt(target_area * aspect)))
        h = int(round(math.sqrt(target_area / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return int(uniform() * (height - h + 1)), int(uniform() * (width - w + 1)), h, w
    in_ratio = width / height
    w, h = width, height
    if in_ratio < RRC_RATIO[0]:
        h = int(round(w / RRC_RATIO[0]))
    elif in_ratio > RRC_RATIO[1]:
        w = int(round(h * RRC_RATIO[1]))
    return (height - h) // 2, (width - w) // 2, h, w


def pillow_rrc_image(img):
    """RandomResizedCrop(224) + RandomHorizontalFlip() + ToTensor + Normalize
    on a PIL image, with Pillow calls (torchvision's PIL backend)."""
    import random

    import numpy as np
    from PIL import Image

    top, left, h, w = rrc_params(img.size[0], img.size[1], random.random)
    img = img.crop((left, top, left + w, top + h)).resize((CROP, CROP), Image.BILINEAR)
    if random.random() < 0.5:
        img = img.transpose(Image.FLIP_LEFT_RIGHT)
    return _normalise_hwc(np.asarray(img))


def pillow_rrc(path):
    from PIL import Image

    with Image.open(path) as img:
        img = img.convert("RGB")
    return pillow_rrc_image(img)


def make_spdl_rrc():
    import spdl.io
    from PIL import Image

    def spdl_rrc(path):
        hwc = spdl.io.to_numpy(spdl.io.load_image(path, filter_desc=spdl.io.get_video_filter_desc(pix_fmt="rgb24")))
        return pillow_rrc_image(Image.fromarray(hwc))

    return spdl_rrc


def feedline_rrc_options(**extra):
    options = dict(random_resized_crop=CROP, hflip=0.5, layout="CHW", dtype="float32", mean=list(MEAN), std=list(STD))
    options.update(extra)
    return options


def feedline_image_options():
    return dict(resize_shorter=RESIZE_SHORTER, crop=CROP, layout="CHW", dtype="float32", mean=list(MEAN), std=list(STD))


def stack_to_torch(images):
    """The batching op of the Python pipelines: list of CHW arrays -> one tensor."""
    import numpy as np
    import torch

    return torch.from_numpy(np.stack(images))


class PillowImages:
    """A map-style dataset for the DataLoader (any object with len/getitem works)."""

    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, index):
        import torch

        return torch.from_numpy(pillow_imagenet(self.paths[index]))


# -- one epoch per contender: a generator of torch tensors ----------------------


def _feedline_epoch(paths, options=None):
    from feedline.io import ops, to_torch
    from feedline.pipeline import PipelineBuilder

    pipeline = (
        PipelineBuilder()
        .add_source(paths)
        .pipe(ops.read_file(), concurrency=4)
        .aggregate(BATCH)
        .pipe(ops.decode_batch(**(options or feedline_image_options())), concurrency=NUM_THREADS)
        .add_sink(3)
        .build(num_threads=NUM_THREADS)
    )
    with pipeline.auto_stop():
        for batch in pipeline:
            yield to_torch(batch)


def _feedline_per_image_epoch(paths):
    from feedline.io import ops, to_torch
    from feedline.pipeline import PipelineBuilder

    pipeline = (
        PipelineBuilder()
        .add_source(paths)
        .pipe(ops.read_file(), concurrency=4)
        .pipe(ops.decode_image(**feedline_image_options()), concurrency=NUM_THREADS)
        .aggregate(BATCH)
        .pipe(ops.stack())
        .add_sink(3)
        .build(num_threads=NUM_THREADS)
    )
    with pipeline.auto_stop():
        for batch in pipeline:
            yield to_torch(batch)


def _python_pipeline_epoch(builder, paths, per_image):
    """The pipeline shape SPDL and feedline share, with Python ops."""
    pipeline = (
        builder.add_source(paths)
        .pipe(per_image, concurrency=NUM_THREADS)
        .aggregate(BATCH)
        .pipe(stack_to_torch)
        .add_sink(3)
        .build(num_threads=NUM_THREADS)
    )
    with pipeline.auto_stop():
        yield from pipeline


def _feedline_pillow_epoch(paths):
    from feedline.pipeline import PipelineBuilder

    return _python_pipeline_epoch(PipelineBuilder(), paths, pillow_imagenet)


class PillowRrcImages(PillowImages):
    def __getitem__(self, index):
        import torch

        return torch.from_numpy(pillow_rrc(self.paths[index]))


def _dataloader_epoch(paths, dataset=PillowImages):
    from torch.utils.data import DataLoader

    loader = DataLoader(dataset(paths), batch_size=BATCH, num_workers=NUM_THREADS, persistent_workers=False)
    yield from loader


def _make_spdl_epoch():
    import spdl.pipeline

    # SPDL logs every pipeline start and stop at INFO.
    logging.getLogger("spdl").setLevel(logging.WARNING)
    per_image = make_spdl_imagenet()
    return lambda paths: _python_pipeline_epoch(spdl.pipeline.PipelineBuilder(), paths, per_image)


def _import_all(*modules):
    # Imported before any timing, so that import time and a missing
    # dependency never show up inside an epoch.
    for module in modules:
        __import__(module)


def make_epoch(name):
    """Returns epoch(paths) for a contender. Raises ImportError if a dependency is missing."""
    if name == "feedline":
        _import_all("torch", "feedline.io", "feedline.pipeline")
        return _feedline_epoch
    if name == "feedline-per-image":
        _import_all("torch", "feedline.io", "feedline.pipeline")
        return _feedline_per_image_epoch
    if name == "feedline-pillow":
        _import_all("torch", "numpy", "PIL.Image", "feedline.pipeline")
        return _feedline_pillow_epoch
    if name == "dataloader":
        _import_all("torch.utils.data", "numpy", "PIL.Image")
        return _dataloader_epoch
    if name == "spdl":
        _import_all("torch", "numpy", "spdl.io", "spdl.pipeline")
        return _make_spdl_epoch()
    if name in ("rrc-feedline", "rrc-prepared", "rrc-no-partial", "rrc-full-decode"):
        _import_all("torch", "feedline.io", "feedline.pipeline")
        extra = {
            "rrc-feedline": {},
            "rrc-prepared": {},
            "rrc-no-partial": {"partial_decode": False},
            "rrc-full-decode": {"partial_decode": False, "dct_scaling": False},
        }[name]
        return lambda paths: _feedline_epoch(paths, feedline_rrc_options(**extra))
    if name in ("rrc-dataloader", "rrc-dataloader-prepared"):
        _import_all("torch.utils.data", "numpy", "PIL.Image")
        return lambda paths: _dataloader_epoch(paths, PillowRrcImages)
    if name == "rrc-spdl":
        _import_all("torch", "numpy", "PIL.Image", "spdl.io", "spdl.pipeline")
        import spdl.pipeline

        logging.getLogger("spdl").setLevel(logging.WARNING)
        per_image = make_spdl_rrc()
        return lambda paths: _python_pipeline_epoch(spdl.pipeline.PipelineBuilder(), paths, per_image)
    raise ValueError(f"unknown contender {name!r}")


# -- worker side: one contender in its own process ------------------------------


def _drain(batches):
    """The consumer loop, the same for every contender: count and check batches."""
    import torch

    count = bad = 0
    for batch in batches:
        ok = isinstance(batch, torch.Tensor) and batch.dtype == torch.float32
        if not (ok and batch.shape[1:] == (3, CROP, CROP)):
            bad += 1
        count += batch.shape[0]
    return count, bad


def _timed(epoch, paths):
    cpu0, wall0 = cpu_seconds(), time.perf_counter()
    count, bad = _drain(epoch(paths))
    wall, cpu = time.perf_counter() - wall0, cpu_seconds() - cpu0
    return {"wall_s": wall, "cpu_s": cpu, "count": count, "bad_batches": bad}


def dataset_paths(data, n):
    return [str(pathlib.Path(data) / f"{i:06d}.jpg") for i in range(n)]


def worker_main(name, args):
    """Measures one contender; prints one JSON line on stdout."""
    try:
        epoch = make_epoch(name)
    except ImportError as e:
        if (e.name or "").split(".")[0] == "feedline":
            raise  # feedline missing is a failure, not a skipped baseline
        print(json.dumps({"unavailable": f"{e.name or e} not installed"}))
        return
    paths = dataset_paths(args.data, args.images)
    warmup = _timed(epoch, paths[: min(len(paths), WARMUP_IMAGES)])
    runs = [_timed(epoch, paths) for _ in range(args.repeat)]
    print(json.dumps({"warmup": warmup, "runs": runs, "peak_rss_kib": peak_rss_kib()}))


def check_main(args):
    """Compares the per-image outputs of the three transforms on a few images.

    Prints one JSON line: for feedline and SPDL, the mean and max absolute
    difference from the Pillow transform, in grey levels (0..255).
    """
    import numpy as np

    import feedline.io

    paths = dataset_paths(args.data, min(args.images, 16))
    reference = [pillow_imagenet(p) for p in paths]

    def feedline_transform(dct_scaling):
        options = dict(feedline_image_options(), dct_scaling=dct_scaling)
        return lambda p: feedline.io.to_numpy(feedline.io.load_image(p, **options))

    others = {"feedline": feedline_transform(True), "feedline, no DCT scaling": feedline_transform(False)}
    try:
        others["spdl"] = make_spdl_imagenet()
    except ImportError:
        pass
    # Normalised units back to grey levels: multiply channel c by 255 * std[c].
    to_grey = np.asarray([255 * s for s in STD], dtype=np.float32)[:, None, None]
    report = {"images": len(paths)}
    for name, transform in others.items():
        diffs = [np.abs(transform(p) - ref) * to_grey for p, ref in zip(paths, reference)]
        report[name] = {"mean": float(np.mean(diffs)), "max": float(np.max(diffs))}
    # RRC: feedline's crop of image i (seed 0, index i) against Pillow's
    # crop() + resize() of the same box, with and without DCT scaling.
    from PIL import Image

    for name, dct in (("feedline RRC", True), ("feedline RRC, no DCT scaling", False)):
        diffs = []
        for i, p in enumerate(paths):
            with Image.open(p) as img:
                img = img.convert("RGB")
            top, left, h, w = feedline.io.random_resized_crop_box(*img.size, seed=0, index=i)
            want = _normalise_hwc(
                np.asarray(img.crop((left, top, left + w, top + h)).resize((CROP, CROP), Image.BILINEAR))
            )
            got = feedline.io.to_numpy(
                feedline.io.load_image(p, **feedline_rrc_options(hflip=0.0, seed=0, index=i, dct_scaling=dct))
            )
            diffs.append(np.abs(got - want) * to_grey)
        report[name] = {"mean": float(np.mean(diffs)), "max": float(np.max(diffs))}
    print(json.dumps(report))


# -- parent side: data, workers, table ------------------------------------------


def ensure_dataset(data, n):
    paths = dataset_paths(data, n)
    if not all(os.path.exists(p) for p in paths):
        # The demo's own generator, in a child so that scikit-image stays out
        # of this process.
        cmd = [sys.executable, str(MAKE_DATA), "--make-data-only", "--images", str(n), "--data", str(data)]
        subprocess.run(cmd, check=True)
    return paths


def prepared_dir(data):
    """Where the prepare_jpeg() copies of the dataset live: beside it."""
    return pathlib.Path(str(data).rstrip("/") + "-prepared")


def prepare_main(args):
    """Writes the prepare_jpeg() copy of every missing image; prints sizes."""
    import feedline.io

    source = dataset_paths(args.data, args.images)
    target = dataset_paths(prepared_dir(args.data), args.images)
    os.makedirs(prepared_dir(args.data), exist_ok=True)
    before = after = 0
    for src, dst in zip(source, target):
        with open(src, "rb") as f:
            data = f.read()
        if not os.path.exists(dst):
            with open(dst + ".tmp", "wb") as f:
                f.write(feedline.io.prepare_jpeg(data, name=src))
            os.replace(dst + ".tmp", dst)
        before += len(data)
        after += os.path.getsize(dst)
    print(json.dumps({"before": before, "after": after}))


def ensure_prepared(args):
    cmd = [sys.executable, os.path.abspath(__file__), "--prepare", "--images", str(args.images), "--data", args.data]
    report, note = run_json(cmd, args.timeout, "prepare", require_success=True)
    if report is None:
        sys.exit(f"preparing the dataset failed: {note}")
    grow = 100 * (report["after"] / report["before"] - 1)
    print(f"Prepared copies (feedline.io.prepare_jpeg, in {prepared_dir(args.data)}): {grow:+.1f}% bytes")


def describe_dataset(paths):
    """Reads every file once (into the page cache) and returns a summary line."""
    total_bytes = 0
    for p in paths:
        with open(p, "rb") as f:
            total_bytes += len(f.read())
    try:
        from PIL import Image
    except ImportError:
        return f"{len(paths)} JPEGs, {total_bytes / 2**20:.1f} MiB"
    sizes = []
    for p in paths:
        with Image.open(p) as img:  # reads the header only
            sizes.append(img.size)
    widths, heights = [w for w, _ in sizes], [h for _, h in sizes]
    return (
        f"{len(paths)} JPEGs, {total_bytes / 2**20:.1f} MiB ({total_bytes / len(paths) / 1024:.0f} KiB each), "
        f"mean {statistics.mean(widths):.0f}x{statistics.mean(heights):.0f}, "
        f"width {min(widths)}-{max(widths)}, height {min(heights)}-{max(heights)}"
    )


def run_contender(contender, args):
    result = Result(contender)
    data = prepared_dir(args.data) if contender.name in PREPARED_CONTENDERS else args.data
    if contender.name in ("limit", "rrc-limit", "rrc-limit-prepared"):
        report, result.note = _run_limit(args, data, rrc=contender.name != "limit")
    else:
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", contender.name]
        cmd += ["--images", str(args.images), "--repeat", str(args.repeat), "--data", str(data)]
        report, result.note = run_json(cmd, args.timeout, contender.name, require_success=False)
    if report is not None:
        fill_result(result, report, args.images)
    elif result.note.startswith("not built"):
        result.skipped = True
    return result


def _run_limit(args, data, rrc=False):
    binary = pathlib.Path(args.limit_bin)
    if not binary.exists():
        return None, "not built (cmake --build build/release --target image_limit)"
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as listing:
        listing.write("\n".join(dataset_paths(data, args.images)) + "\n")
        listing.flush()
        cmd = [str(binary), str(NUM_THREADS), "--repeat", str(args.repeat), "--list", listing.name]
        if rrc:
            cmd.append("--rrc")
        return run_json(cmd, args.timeout, "rrc-limit" if rrc else "limit", require_success=False)


def print_same_work(args):
    """Runs the output comparison in a child (it imports every library)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--check", "--images", str(args.images), "--data", str(args.data)]
    report, note = run_json(cmd, args.timeout, "check", require_success=False)
    if report is None:
        print(f"\nSame work: check failed ({note})")
        return
    print(f"\nSame work: |output - Pillow transform| over the first {report['images']} images, in grey levels:")
    for name in ("feedline", "feedline, no DCT scaling", "spdl", "feedline RRC", "feedline RRC, no DCT scaling"):
        if name in report:
            print(f"  {name:25} mean {report[name]['mean']:.2f}, max {report[name]['max']:.1f}")
        else:
            print(f"  {name:25} not installed")


def print_header(args, dataset_line):
    cpus = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cpus
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print("ImageNet-style loading: JPEG -> Resize(256, bilinear) + CenterCrop(224) -> float32 CHW normalised")
    print(f"  -> batches of {BATCH}, as torch tensors; {NUM_THREADS} threads / worker processes")
    versions = ", ".join(f"{d} {dist_version(d)}" for d in ("torch", "spdl", "feedline", "Pillow", "numpy"))
    print(f"Python {platform.python_version()}, {versions}")
    print(f"CPUs: {cpus} ({usable} usable), load average at start: {load}")
    print(f"Dataset: {dataset_line}")
    print(
        f"Median of {args.repeat} timed epoch(s) of {args.images} images after a warm-up on "
        f"{min(args.images, WARMUP_IMAGES)}; each contender in its own process."
    )
    print("CPU = user+sys of the worker and its children; peak RSS = worker + largest child.")
    if args.quick:
        print("--quick: smoke run only; do not read the numbers.")


def parent_main(args):
    names = [c.name for c in CONTENDERS] if not args.only else args.only.split(",")
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        sys.exit(f"unknown contender(s) {', '.join(unknown)}; choose from {', '.join(BY_NAME)}")
    paths = ensure_dataset(args.data, args.images)
    print_header(args, describe_dataset(paths))
    if any(n in PREPARED_CONTENDERS for n in names):
        ensure_prepared(args)
    results = []
    for name in names:
        print(f"  running {name} ...", flush=True)
        results.append(run_contender(BY_NAME[name], args))
    center = [r for r in results if r.contender.name not in RRC_CONTENDERS]
    augment = [r for r in results if r.contender.name in RRC_CONTENDERS]
    print_table(center)
    print_goals(results, args.quick)
    print_same_work(args)
    if augment:
        print("\nTraining augmentation: RandomResizedCrop(224, scale=(0.08, 1), ratio=(3/4, 4/3))")
        print("  + RandomHorizontalFlip(0.5) -> float32 CHW normalised, batches of 32")
        print_table(augment, baselines=("rrc-dataloader", "rrc-spdl", "rrc-limit"))
        print_rrc_goals(results, args.quick)
    failed = [r for r in results if not r.items_ok and not r.skipped]
    return 1 if failed else 0


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--images", type=int, default=2000, help="use the first N images of the dataset")
    p.add_argument("--repeat", type=int, default=3, help="timed epochs per contender (median is reported)")
    p.add_argument("--only", help=f"comma-separated contenders out of {','.join(BY_NAME)}")
    p.add_argument("--quick", action="store_true", help="smoke run: 64 images, 1 repeat")
    p.add_argument("--data", default=str(DEFAULT_DATA), help="dataset folder (made if missing)")
    p.add_argument("--limit-bin", default=str(DEFAULT_LIMIT_BIN), help="the image_limit program")
    p.add_argument("--timeout", type=float, default=900, help="seconds before a worker is given up on")
    # Internal: run one contender (or the output check) in this process.
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--check", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--prepare", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.images, args.repeat = 64, 1
    if args.images < 1 or args.repeat < 1:
        p.error("--images and --repeat must be positive")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.prepare:
        prepare_main(args)
        return 0
    return dispatch(args, worker_main, parent_main, check_main)


if __name__ == "__main__":
    sys.exit(main())
