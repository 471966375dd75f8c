# SPDX-License-Identifier: Apache-2.0
"""Encoding: feedline.io against PyAV, Pillow and the ``ffmpeg`` CLI.

What is measured, on 2 cores, each contender in its own process (this
script with ``--worker NAME``, which prints one JSON line):

- **H.264 720p**: ``--frames`` RGB frames (1280x720, ``testsrc2`` with
  noise, made once by the ``ffmpeg`` CLI and held in memory as a uint8
  (N, 720, 1280, 3) array) encoded to an MP4 file with libx264, yuv420p,
  CRF 23, preset ``medium``, 2 threads, in batches of 10 frames:
  ``feedline.io.Muxer`` + ``create_reference_video_frame`` (the RGB ->
  yuv420p conversion in the encoder) | PyAV (``VideoFrame.from_ndarray`` +
  ``stream.encode``, PyAV converting) | the ``ffmpeg`` CLI reading the same
  frames as raw RGB from a pipe (the reference: no Python at all).
- **PNG**: ``--images`` photographs (scikit-image's samples, RGB, up to
  512 px) encoded to PNG bytes on a ``ThreadPoolExecutor`` of 2 threads,
  default compression with the Paeth filter (what PyAV's PNGs have;
  feedline deflates with libdeflate, PyAV with zlib, at the same level
  6): ``feedline.io.encode_image`` | PyAV (a ``png`` CodecContext per
  image) | Pillow (``Image.save(format="PNG")``,
  adaptive filters) | the CLI (``image2pipe`` of the same raw frames with
  2 threads, one process for each image size).

Frames/s or images/s is the median of ``--repeat`` timed runs after a
warm-up; CPU is the worker's user+sys per item; KiB out/item the size of
what it wrote (the same work: files of about the same size); peak RSS its
``ru_maxrss`` (which includes the frames in memory). Every contender's
output is checked: the H.264 files must hold every frame (ffprobe's count) at a PSNR over 30 dB
against the input, and every PNG must decode to the input exactly.

Goals for feedline (the issue's): >= 1.0x PyAV on both.

The script ends with one line::

    ENCODE h264 feedline/PyAV X.XX  png feedline/PyAV Y.YY

Run::

    python bench/python/encode.py                  # 120 frames, 200 images
    python bench/python/encode.py --quick          # smoke run
    python bench/python/encode.py --only feedline-h264,feedline-png
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
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import benchlib  # noqa: E402

W, H, RATE, BATCH = 1280, 720, 30, 10
THREADS = 2
H264 = ["feedline-h264", "pyav-h264", "cli-h264"]
PNG = ["feedline-png", "pyav-png", "pillow-png", "cli-png"]
LABELS = {
    "feedline-h264": "feedline (Muxer + libx264)",
    "pyav-h264": "PyAV (libx264)",
    "cli-h264": "ffmpeg CLI (raw RGB pipe, reference)",
    "feedline-png": "feedline (encode_image)",
    "pyav-png": "PyAV (png CodecContext)",
    "pillow-png": "Pillow (Image.save)",
    "cli-png": "ffmpeg CLI (image2pipe, reference)",
}


def _frames(n: int):
    import numpy as np

    raw = subprocess.run(
        [
            "ffmpeg", "-v", "error", "-f", "lavfi",
            "-i", f"testsrc2=size={W}x{H}:rate={RATE},noise=alls=8:allf=t",
            "-frames:v", str(n), "-f", "rawvideo", "-pix_fmt", "rgb24", "-",
        ],
        check=True,
        capture_output=True,
    ).stdout  # fmt: skip
    return np.frombuffer(raw, np.uint8).reshape(n, H, W, 3)


def _psnr(a, b) -> float:
    import numpy as np

    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return 99.0 if mse == 0 else 10 * float(np.log10(255.0**2 / mse))


def _check_h264(path, frames) -> str:
    import numpy as np

    probe = json.loads(
        subprocess.run(
            ["ffprobe", "-v", "error", "-count_frames", "-show_streams", "-of", "json", str(path)],
            check=True,
            capture_output=True,
        ).stdout
    )
    count = int(probe["streams"][0]["nb_read_frames"])
    if count != len(frames):
        return f"{count} frames of {len(frames)}"
    raw = subprocess.run(
        ["ffmpeg", "-v", "error", "-i", str(path), "-frames:v", "5", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
        check=True,
        capture_output=True,
    ).stdout
    got = np.frombuffer(raw, np.uint8).reshape(-1, H, W, 3)
    psnr = _psnr(got, frames[: len(got)])
    return "" if psnr >= 30 else f"PSNR {psnr:.1f} dB"


# --- contenders ---------------------------------------------------------------


def h264_feedline(frames, path):
    import feedline.io as fio

    muxer = fio.Muxer(path)
    cfg = fio.video_encode_config(height=H, width=W, frame_rate=RATE, pix_fmt="yuv420p")
    enc = muxer.add_encode_stream(
        cfg, encoder="libx264", encoder_config={"crf": "23", "preset": "medium", "threads": "2"}
    )
    with muxer.open():
        for i in range(0, len(frames), BATCH):
            packets = enc.encode(fio.create_reference_video_frame(frames[i : i + BATCH], "rgb24", RATE, i))
            if packets is not None:
                muxer.write(0, packets)
        rest = enc.flush()
        if rest is not None:
            muxer.write(0, rest)


def h264_pyav(frames, path):
    import av

    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=RATE)
        stream.width, stream.height, stream.pix_fmt = W, H, "yuv420p"
        stream.options = {"crf": "23", "preset": "medium"}
        stream.codec_context.thread_count = 2
        for f in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(f, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)


def h264_cli(frames, path):
    cmd = [
        "ffmpeg", "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24",
        "-s", f"{W}x{H}", "-r", str(RATE), "-i", "-",
        "-c:v", "libx264", "-pix_fmt", "yuv420p", "-crf", "23", "-preset", "medium", "-threads", "2", str(path),
    ]  # fmt: skip
    subprocess.run(cmd, input=frames.tobytes(), check=True)


def _png_feedline():
    import feedline.io as fio

    return lambda img: fio.encode_image(img, format="png")


def _png_pyav():
    import av

    def encode(img):
        ctx = av.CodecContext.create("png", "w")
        ctx.width, ctx.height, ctx.pix_fmt = img.shape[1], img.shape[0], "rgb24"
        ctx.time_base = 1
        data = b"".join(bytes(p) for p in ctx.encode(av.VideoFrame.from_ndarray(img, format="rgb24")))
        return data + b"".join(bytes(p) for p in ctx.encode(None))

    return encode


def _png_pillow():
    import io

    from PIL import Image

    def encode(img):
        buf = io.BytesIO()
        Image.fromarray(img).save(buf, format="PNG")
        return buf.getvalue()

    return encode


def _on_threads(make):
    """Encodes the images on a pool of 2 threads (made once per run)."""

    def run(images):
        encode = make()
        with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
            return list(pool.map(encode, images))

    return run


png_feedline = _on_threads(_png_feedline)
png_pyav = _on_threads(_png_pyav)
png_pillow = _on_threads(_png_pillow)


def png_cli(images):
    # One process for all images of one size: what a shell loop could not beat.
    import io

    out = []
    by_size: dict = {}
    for img in images:
        by_size.setdefault(img.shape, []).append(img)
    for (h, w, _), group in by_size.items():
        raw = b"".join(g.tobytes() for g in group)
        blob = subprocess.run(
            ["ffmpeg", "-v", "error", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{w}x{h}", "-i", "-",
             "-c:v", "png", "-pred", "paeth", "-threads", str(THREADS), "-f", "image2pipe", "-"],
            input=raw, check=True, capture_output=True,
        ).stdout  # fmt: skip
        out.append(io.BytesIO(blob))
    return out


def _check_png(blobs, images) -> str:
    import io

    import numpy as np
    from PIL import Image

    for blob, img in zip(blobs, images):
        got = np.asarray(Image.open(io.BytesIO(blob)).convert("RGB"))
        if not np.array_equal(got, img):
            return "a PNG does not decode to its image"
    return ""


# --- worker and parent ----------------------------------------------------------


def worker_main(name, args):
    import numpy as np

    result = {"name": name}
    if name.endswith("h264"):
        frames = _frames(args.frames)
        run = {"feedline-h264": h264_feedline, "pyav-h264": h264_pyav, "cli-h264": h264_cli}[name]
        with tempfile.TemporaryDirectory() as tmp:
            path = pathlib.Path(tmp) / "out.mp4"
            run(frames[:BATCH], path)  # warm-up
            times, cpus = [], []
            for _ in range(args.repeat):
                c0, t0 = benchlib.cpu_seconds(), time.perf_counter()
                run(frames, path)
                times.append(time.perf_counter() - t0)
                cpus.append(benchlib.cpu_seconds() - c0)
            result["error"] = _check_h264(path, frames)
            result["out_kib"] = path.stat().st_size / len(frames) / 1024
        items = len(frames)
    else:
        images = benchlib.photos(args.images)
        run = {"feedline-png": png_feedline, "pyav-png": png_pyav, "pillow-png": png_pillow, "cli-png": png_cli}[name]
        run(images[:4])
        times, cpus = [], []
        for _ in range(args.repeat):
            c0, t0 = benchlib.cpu_seconds(), time.perf_counter()
            blobs = run(images)
            times.append(time.perf_counter() - t0)
            cpus.append(benchlib.cpu_seconds() - c0)
        result["error"] = "" if name == "cli-png" else _check_png(blobs, images)
        sizes = [len(b.getvalue()) if hasattr(b, "getvalue") else len(b) for b in blobs]
        result["out_kib"] = sum(sizes) / len(images) / 1024
        items = len(images)
    seconds = statistics.median(times)
    result.update(
        items=items,
        rate=items / seconds,
        cpu_ms=1000 * statistics.median(cpus) / items,
        rss_mib=benchlib.peak_rss_kib() / 1024,
        frames_mib=float(np.prod((items, H, W, 3))) / 2**20 if name.endswith("h264") else 0.0,
    )
    print(json.dumps(result))


def _available(name: str) -> str:
    needs = {"pyav": "av", "pillow": "PIL"}
    module = needs.get(name.split("-")[0])
    if module and importlib.util.find_spec(module) is None:
        return f"{module} is not installed"
    return ""


def parent_main(args):
    wanted = args.only.split(",") if args.only else H264 + PNG
    results = {}
    for name in wanted:
        if note := _available(name):
            print(f"{name}: skipped ({note})")
            continue
        cmd = [sys.executable, __file__, "--worker", name, "--frames", str(args.frames), "--images", str(args.images)]
        cmd += ["--repeat", str(args.repeat)]
        out, note = benchlib.run_json(cmd, timeout=1800, label=name)
        if out is None:
            print(f"{name}: {note}")
            continue
        results[name] = out
    failed = False
    for group, names, unit in (("H.264 720p", H264, "frames/s"), ("PNG", PNG, "images/s")):
        rows = [n for n in names if n in results]
        if not rows:
            continue
        base = results.get(names[1])
        print(f"\n{group} ({results[rows[0]]['items']} items, median of {args.repeat})")
        print(f"| contender | {unit} | vs PyAV | CPU ms/item | KiB out/item | peak RSS MiB | check |")
        print("|---|---:|---:|---:|---:|---:|---|")
        for n in rows:
            r = results[n]
            ratio = f"{r['rate'] / base['rate']:.2f}x" if base else "-"
            check = r["error"] or "ok"
            failed = failed or bool(r["error"])
            cells = f"{r['rate']:,.1f} | {ratio} | {r['cpu_ms']:.1f} | {r['out_kib']:,.1f} | {r['rss_mib']:.0f}"
            print(f"| {LABELS[n]} | {cells} | {check} |")

    def ratio(a, b):
        return f"{results[a]['rate'] / results[b]['rate']:.2f}" if a in results and b in results else "n/a"

    print(
        f"\nENCODE h264 feedline/PyAV {ratio('feedline-h264', 'pyav-h264')}  png feedline/PyAV {ratio('feedline-png', 'pyav-png')}"
    )
    return 1 if failed else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--frames", type=int, default=120)
    p.add_argument("--images", type=int, default=200)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--only", default="")
    p.add_argument("--quick", action="store_true", help="a smoke run: few items, one repeat")
    p.add_argument("--worker", default="")
    args = p.parse_args()
    if args.quick:
        args.frames, args.images, args.repeat = 20, 12, 1
    return benchlib.dispatch(args, worker_main, parent_main)


if __name__ == "__main__":
    sys.exit(main())
