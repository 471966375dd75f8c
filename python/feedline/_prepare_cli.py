"""``python -m feedline prepare-jpegs SRC DST``: :func:`feedline.io.prepare_jpeg`
over a folder tree.

Every ``*.jpg``/``*.jpeg`` file under SRC (any case) is rewritten into the
same relative path under DST; other files are left alone. A file that
cannot be rewritten (a PNG named ``.jpg``, a damaged JPEG) is copied
unchanged, so that DST holds every image SRC does, and named on stderr with
the reason: the loader reports a damaged file when it reads it, as it would
have from SRC. Files are read, rewritten and written on a feedline pipeline
of ``--threads`` threads (the rewrite runs in C++ without the GIL); a file
that cannot be read or written is a failure the pipeline logs, with its
name, and counts. Exits 1 when a file failed, or when ``--strict`` is given
and a file was copied unchanged.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import sys

JPEG_SUFFIXES = (".jpg", ".jpeg")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("src", help="folder of JPEGs (searched recursively)")
    ap.add_argument("dst", help="folder for the rewritten files (the same relative paths)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="threads (default: every CPU)")
    ap.add_argument("--strict", action="store_true", help="exit 1 if any file had to be copied unchanged")


def _jpegs(src: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in src.rglob("*") if p.suffix.lower() in JPEG_SUFFIXES and p.is_file())


def run(args: argparse.Namespace) -> int:
    import feedline
    import feedline.io
    from feedline.pipeline import PipelineBuilder

    src, dst = pathlib.Path(args.src), pathlib.Path(args.dst)
    if not src.is_dir():
        print(f"prepare-jpegs: {src} is not a folder", file=sys.stderr)
        return 1
    if args.threads < 1:
        print("prepare-jpegs: --threads must be at least 1", file=sys.stderr)
        return 1
    paths = _jpegs(src)

    def prepare(path: pathlib.Path) -> tuple[int, int, str]:
        """Writes one file; returns (bytes in, bytes out, why it was copied
        unchanged, or '')."""
        out = dst / path.relative_to(src)
        data = path.read_bytes()  # an OSError names the path
        try:
            rewritten = feedline.io.prepare_jpeg(data, name=str(path))
            why = ""
        except (feedline.DecodeError, feedline.UnsupportedFormat) as e:
            rewritten, why = data, str(e)
        tmp = out.with_name(out.name + ".tmp")
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(rewritten)
            os.replace(tmp, out)
            if why:
                shutil.copystat(path, out)
        except OSError as e:
            raise OSError(f"{path}: cannot write {out}: {e}") from e
        return len(data), len(rewritten), why

    pipeline = (
        PipelineBuilder()
        .add_source(paths)
        .pipe(prepare, concurrency=args.threads, output_order="completion")
        .add_sink(args.threads * 2)
        .build(num_threads=args.threads)
    )
    before = after = rewritten = 0
    copied = []
    with pipeline.auto_stop():
        for n_in, n_out, why in pipeline:
            before += n_in
            after += n_out
            if why:
                copied.append(why)
                print(f"copied unchanged: {why}", file=sys.stderr)
            else:
                rewritten += 1
    failed = len(paths) - rewritten - len(copied)
    grow = f" ({100 * (after / before - 1):+.1f}% bytes)" if before else ""
    print(f"{rewritten} rewritten, {len(copied)} copied unchanged, {failed} failed, of {len(paths)} JPEGs{grow}")
    return 1 if failed or (args.strict and copied) else 0
