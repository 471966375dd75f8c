"""The commands of ``python -m feedline``.

``info``
    feedline's version, Python's, the versions of the libraries the
    extension runs with (:func:`feedline.io.utils.get_library_versions`),
    the FFmpeg decoders found for common codecs, the CPU count and the
    extension's build type (whether it is a debug build). ``--json`` prints
    the same as one JSON object.
``prepare-jpegs SRC DST``
    :func:`feedline.io.prepare_jpeg` over every JPEG of a folder tree and
    every JPEG member of its ``.tar`` and ``.zip`` shards, into the same relative paths
    under DST; or over one shard (see :mod:`feedline._prepare_cli`).
``demo``
    The README's demo for an installed package: makes a dataset of images
    in a temporary directory and loads it through the native image pipeline
    (see :mod:`feedline._demo`).
``stats FILE``
    Reads a statistics export (JSON Lines of ``PipelineStats.to_json()``):
    the per-stage table with the bottleneck named, the delivery rate over
    the intervals, and with ``--plot OUT.png`` throughput, occupancy and
    queue depth over time (see :mod:`feedline._stats_cli`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from typing import Any

# Codecs whose decoders `info` lists: the common video, audio and image ones.
COMMON_CODECS = ("h264", "hevc", "vp9", "av1", "aac", "mp3", "opus", "flac", "mjpeg", "png")


def build_type() -> str:
    """The CMake build type the extension was compiled with ("Release",
    "Debug", ...)."""
    from . import _feedline_ext

    return str(_feedline_ext._build_type)


def collect_info() -> dict[str, Any]:
    """What ``info`` reports, as plain data."""
    import feedline
    from feedline.io import utils

    decoders = utils.get_ffmpeg_decoders()
    affinity = getattr(os, "sched_getaffinity", None)
    kind = build_type()
    return {
        "feedline": feedline.__version__,
        "python": f"{platform.python_version()} ({platform.python_implementation()}, {sys.executable})",
        "platform": platform.platform(),
        "libraries": utils.get_library_versions(),
        "decoders": {codec: decoders.get(codec, []) for codec in COMMON_CODECS},
        "cpu_count": os.cpu_count(),
        "cpu_usable": len(affinity(0)) if affinity is not None else os.cpu_count(),
        "build_type": kind,
        "debug_build": kind == "Debug",
    }


def format_info(info: dict[str, Any]) -> str:
    """``info``'s text: one ``name: value`` line each, libraries and
    decoders indented below their heading."""
    lines = [
        f"feedline: {info['feedline']}",
        f"python: {info['python']}",
        f"platform: {info['platform']}",
        f"cpu count: {info['cpu_count']} ({info['cpu_usable']} usable by this process)",
        f"extension build: {info['build_type']} (debug build: {'yes' if info['debug_build'] else 'no'})",
        "libraries:",
    ]
    lines += [f"  {name}: {version}" for name, version in info["libraries"].items()]
    lines.append("FFmpeg decoders (codec: decoders, preferred first):")
    for codec, names in info["decoders"].items():
        lines.append(f"  {codec}: {', '.join(names) if names else '(none)'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None, prog: str = "feedline") -> int:
    """The ``feedline`` command (a console script) and ``python -m feedline``."""
    ap = argparse.ArgumentParser(prog=prog, description="feedline's command line.")
    sub = ap.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="versions, FFmpeg decoders, CPU count and build type")
    info.add_argument("--json", action="store_true", help="print one JSON object")
    demo = sub.add_parser("demo", help="load a generated image dataset through the native pipeline")
    from . import _demo, _prepare_cli, _stats_cli

    _demo.add_arguments(demo)
    stats = sub.add_parser("stats", help="read a statistics export (JSON Lines): table, bottleneck, plot")
    _stats_cli.add_arguments(stats)
    prepare = sub.add_parser("prepare-jpegs", help="rewrite a folder of JPEGs for cropped decoding (prepare_jpeg)")
    _prepare_cli.add_arguments(prepare)
    args = ap.parse_args(argv)

    if args.command == "info":
        data = collect_info()
        print(json.dumps(data, indent=2) if args.json else format_info(data))
        return 0
    if args.command == "stats":
        return _stats_cli.run(args)
    if args.command == "prepare-jpegs":
        return _prepare_cli.run(args)
    return _demo.run(args)
