# SPDX-License-Identifier: Apache-2.0
"""The clips of bench/python/video.py and each contender's loader (item ->
uint8 array (N, H, W, 3)). See video.py for what is measured and how."""

from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import math
import os
import pathlib
import random
import re
import subprocess
import tempfile

from benchlib import run_json

DATA_VERSION = 1  # bump when the clip generator changes, to regenerate the cache
FPS = 30
WINDOW_FRAMES = 8
WINDOW_SEED = 1234
RESOLUTIONS = ((1280, 720), (1920, 1080))
RESIZE = 224  # the resize scenario's output: RESIZE x RESIZE rgb24, stretched


# -- clips ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Clip:
    path: str
    width: int
    height: int
    frames: int
    fps: float


@dataclasses.dataclass(frozen=True)
class Item:
    """One unit of work: a whole clip (window None) or a window (t, e) of it."""

    path: str
    width: int
    height: int
    window: tuple[float, float] | None
    expected: int  # frames
    resize: bool = False  # decoded straight to RESIZE x RESIZE (width, height are RESIZE)


def clip_specs(args):
    """(filename, width, height, seconds, seed) of every clip this run uses."""
    specs = []
    for width, height in RESOLUTIONS:
        for i in range(args.clips):
            name = f"{height}p-{args.seconds:g}s-noise{args.noise}-{i}.mp4"
            specs.append((name, width, height, args.seconds, 1000 * height + i))
    return specs


def _ffmpeg_encode(path, width, height, seconds, noise, seed):
    source = f"testsrc2=size={width}x{height}:rate={FPS}:duration={seconds},noise=alls={noise}:allf=t:all_seed={seed}"
    tmp = path.with_suffix(".tmp.mp4")
    cmd = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i", source]
    cmd += ["-c:v", "libx264", "-preset", "medium", "-pix_fmt", "yuv420p", "-an", str(tmp)]
    subprocess.run(cmd, check=True)
    os.replace(tmp, path)


def _ffprobe(path):
    cmd = ["ffprobe", "-v", "error", "-select_streams", "v:0", "-count_packets"]
    cmd += ["-show_entries", "stream=width,height,nb_frames,nb_read_packets,avg_frame_rate:format=bit_rate"]
    cmd += ["-of", "json", str(path)]
    info = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    stream = info["streams"][0]
    num, den = (int(x) for x in stream["avg_frame_rate"].split("/"))
    # Keyframes: packets flagged K.
    cmd = ["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "packet=flags"]
    cmd += ["-of", "csv=p=0", str(path)]
    flags = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split()
    return {
        "width": int(stream["width"]),
        "height": int(stream["height"]),
        "frames": int(stream["nb_frames"]),
        "fps": num / den,
        "bit_rate": int(info["format"]["bit_rate"]),
        "keyframes": sum("K" in f for f in flags),
    }


def x264_settings(path):
    """The encoder's settings as x264 writes them into the stream (an SEI)."""
    with open(path, "rb") as f:
        head = f.read(1 << 20)
    m = re.search(rb"x264 - core (\d+)[^\x00]*?options: ([^\x00]*)", head)
    if not m:
        return "x264 settings not found in the stream"
    options = dict(kv.split("=", 1) for kv in m.group(2).decode(errors="replace").split() if "=" in kv)
    keys = ("bframes", "b_pyramid", "ref", "keyint", "keyint_min", "scenecut", "rc", "crf")
    shown = " ".join(f"{k}={options[k]}" for k in keys if k in options)
    return f"x264 core {m.group(1).decode()}: {shown}"


def ensure_clips(args):
    """Makes the missing clips; returns their manifest entries (parent only)."""
    folder = pathlib.Path(args.data)
    folder.mkdir(parents=True, exist_ok=True)
    manifest_path = folder / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text())
        clips = manifest["clips"] if manifest.get("version") == DATA_VERSION else {}
    except (OSError, ValueError, KeyError):
        clips = {}
    entries, changed = [], False
    for name, width, height, seconds, seed in clip_specs(args):
        path = folder / name
        if name not in clips or not path.exists():
            print(f"  making {name} (libx264, preset medium) ...", flush=True)
            _ffmpeg_encode(path, width, height, seconds, args.noise, seed)
            clips[name] = _ffprobe(path)
            changed = True
        entries.append({"path": str(path), **clips[name]})
    if changed:
        manifest_path.write_text(json.dumps({"version": DATA_VERSION, "clips": clips}, indent=1))
    return entries


def read_clips(args):
    """The clips of this run from the manifest (workers: the parent made them)."""
    manifest = json.loads((pathlib.Path(args.data) / "manifest.json").read_text())["clips"]
    clips = []
    for name, *_ in clip_specs(args):
        e = manifest[name]
        clips.append(Clip(str(pathlib.Path(args.data) / name), e["width"], e["height"], e["frames"], e["fps"]))
    return clips


def make_items(scenario, clips, n_windows):
    """The work list: the same in every process (deterministic)."""
    by_res = collections.defaultdict(list)
    for clip in clips:
        by_res[clip.height].append(clip)
    groups = [by_res[h] for _, h in RESOLUTIONS if by_res[h]]
    if scenario in ("whole", "resize"):
        # 720p and 1080p alternate, so both workers see a mix.
        ordered = [c for row in itertools.zip_longest(*groups) for c in row if c is not None]
        if scenario == "resize":
            return [Item(c.path, RESIZE, RESIZE, None, c.frames, resize=True) for c in ordered]
        return [Item(c.path, c.width, c.height, None, c.frames) for c in ordered]
    rng = random.Random(WINDOW_SEED)
    items = []
    for i in range(n_windows):
        clip = rng.choice(groups[i % len(groups)])
        k = rng.randrange(0, clip.frames - WINDOW_FRAMES)  # frames k+1 .. k+8 exist
        start = (k + rng.uniform(0.1, 0.9)) / clip.fps
        items.append(Item(clip.path, clip.width, clip.height, (start, start + WINDOW_FRAMES / clip.fps), WINDOW_FRAMES))
    return items


# -- loaders: item -> uint8 array (N, H, W, 3) -------------------------------------


def pyav_loader(thread_type):
    import av
    import numpy as np

    def rgb(frame, item):
        if item.resize:  # one swscale call: scale and convert (bicubic, as the others)
            return frame.to_ndarray(format="rgb24", width=RESIZE, height=RESIZE, interpolation="BICUBIC")
        return frame.to_ndarray(format="rgb24")

    def load(item):
        with av.open(item.path) as container:
            stream = container.streams.video[0]
            if thread_type:
                stream.thread_type = thread_type
            if item.window is None:
                frames = [rgb(f, item) for f in container.decode(stream)]
            else:
                start, end = item.window
                container.seek(int(start / stream.time_base), stream=stream, backward=True)
                frames = []
                for f in container.decode(stream):
                    t = f.time
                    if t < start:
                        continue
                    if t >= end:
                        break
                    frames.append(rgb(f, item))
            return np.stack(frames)

    return load


def spdl_loader(threads):
    import spdl.io

    decode_config = None if threads is None else spdl.io.DecodeConfig(decoder_options={"threads": str(threads)})
    resize = spdl.io.get_video_filter_desc(scale_width=RESIZE, scale_height=RESIZE, scale_mode=None, pix_fmt="rgb24")

    def load(item):
        kwargs = {"filter_desc": resize} if item.resize else {}
        return spdl.io.to_numpy(
            spdl.io.load_video(item.path, timestamp=item.window, decode_config=decode_config, **kwargs)
        )

    return load


def torchcodec_loader(seek_mode, threads):
    from torchcodec.decoders import VideoDecoder

    def load(item):
        if item.resize:
            raise AttributeError("torchcodec: resizing while decoding is not measured here")
        decoder = VideoDecoder(item.path, seek_mode=seek_mode, num_ffmpeg_threads=threads, dimension_order="NHWC")
        if item.window is None:
            return decoder.get_frames_in_range(0, len(decoder)).data
        first = math.ceil(item.window[0] * decoder.metadata.average_fps)
        return decoder.get_frames_in_range(first, first + WINDOW_FRAMES).data

    return load


def feedline_loader(threads):
    import numpy as np

    import feedline.io as fio

    load_video = fio.load_video  # AttributeError until feedline has it
    cfg = fio.decode_config(threads=threads) if threads is not None else None
    # scale + format only: load_video converts each frame with one swscale
    # call straight into the output, with no filter graph.
    resize = fio.get_video_filter_desc(scale_width=RESIZE, scale_height=RESIZE, scale_mode=None, pix_fmt="rgb24")

    def load(item):
        kwargs = {"filter_desc": resize} if item.resize else {}
        return np.asarray(load_video(item.path, timestamp=item.window, decode_config=cfg, **kwargs))

    return load


def make_loader(config):
    """Returns load(item). Raises ImportError/AttributeError/OSError if unavailable."""
    o = config.options
    if config.lib == "feedline":
        return feedline_loader(o["threads"])
    if config.lib == "pyav":
        return pyav_loader(o["thread_type"])
    if config.lib == "spdl":
        return spdl_loader(o["threads"])
    if config.lib == "torchcodec":
        return torchcodec_loader(o["seek_mode"], o["threads"])
    raise ValueError(config.name)


# -- demuxers: path -> number of video packets -------------------------------------

# (name, library, label) of the demux-throughput contenders.
DEMUXERS = (
    ("feedline", "feedline", "demux_video, defaults (probes the streams, as SPDL: complete codec metadata)"),
    ("feedline-noprobe", "feedline", "demux_video, demux_config(find_stream_info=False): the MP4 header only"),
    ("spdl", "spdl", "spdl.io.demux_video, defaults"),
    ("pyav", "pyav", "av.open + container.demux(video stream)"),
)


def make_demuxer(name):
    """Returns demux(path) -> packet count. Raises ImportError etc. if unavailable."""
    if name in ("feedline", "feedline-noprobe"):
        import feedline.io as fio

        cfg = fio.demux_config(find_stream_info=False) if name == "feedline-noprobe" else None
        return lambda path: len(fio.demux_video(path, demux_config=cfg))
    if name == "spdl":
        import spdl.io

        return lambda path: len(spdl.io.demux_video(path))
    if name == "pyav":
        import av

        def demux(path):
            with av.open(path) as container:
                stream = container.streams.video[0]
                return sum(1 for p in container.demux(stream) if p.size)  # the last one is an empty flush packet

        return demux
    raise ValueError(name)


# -- the bounds: bench/cpp/video_limit ----------------------------------------------

LIMIT_BIN = pathlib.Path(__file__).resolve().parents[2] / "build" / "release" / "bench" / "cpp" / "video_limit"
# video_limit's --mode per scenario for limit/threads.
LIMIT_MODES = {"whole": "rgb", "resize": "resize"}


def run_limit(scenario, config, items, args, workers):
    """video_limit over the items' clips, its report shaped as a worker's."""
    binary = pathlib.Path(args.limit_bin)
    if not binary.exists():
        return {"unavailable": "not built (cmake --build build/release --target video_limit)"}, ""
    mode = config.options["mode"] or LIMIT_MODES[scenario]
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as listing:
        listing.write("".join(f"{item.path}\n" for item in items))
        listing.flush()
        cmd = [str(binary), str(workers), "--repeat", str(args.repeat), "--mode", mode, "--list", listing.name]
        report, note = run_json(cmd, args.timeout, f"{scenario}:{config.name}", require_success=False)
    if report is None:
        return None, note
    for r in report["runs"]:
        # The rate of both threads busy from start to end: the sum of the
        # clips' decode times over the threads, without the pass's end where
        # one thread waits for the other's last clip (a loader that gives
        # that clip more decoder threads does not wait).
        r.update(wall_s=r["busy_s"] / workers, items=len(r["counts"]), bad=r["failed"])
        r["example"] = "see its stderr above" if r["failed"] else ""
    report["info"] = "limit: video_limit (C++, system FFmpeg)"
    return report, ""
