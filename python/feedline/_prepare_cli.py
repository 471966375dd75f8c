"""``python -m feedline prepare-jpegs SRC DST``: :func:`feedline.io.prepare_jpeg`
over a folder tree or tar and ZIP shards.

Every ``*.jpg``/``*.jpeg`` file under SRC (any case) is rewritten into the
same relative path under DST; so is every ``*.tar`` shard, with each of its
``*.jpg``/``*.jpeg`` members rewritten and every other byte of it (other
members, directories, links, long-name and pax headers) kept, and every
``*.zip`` shard, its rewritten members stored and every other member's
bytes, names, times and comments kept. A shard is read a piece at a time
(its headers, the members being rewritten) and written member by member
as the pipeline rewrites them, so a shard of any size needs only the
members in flight in memory. SRC may also be one ``.tar`` or ``.zip``
file, DST then the file to write. Other files are left alone. A JPEG that
cannot be rewritten (a PNG named ``.jpg``, a damaged
JPEG) is kept unchanged, so that DST holds every image SRC does, and named
on stderr with the reason: the loader reports a damaged file when it reads
it, as it would have from SRC. Files (and a shard's members) are read,
rewritten and written on a feedline pipeline of ``--threads`` threads (the
rewrite runs in C++ without the GIL); a file that cannot be read or written
is a failure the pipeline logs, with its name, and counts. A shard that is
damaged (:class:`feedline.FormatError`) or cannot be read or written is
named on stderr and not written. Exits 1 when a file or a shard failed, or
when ``--strict`` is given and a JPEG was kept unchanged.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import shutil
import sys
from collections.abc import Callable, Generator, Iterable
from typing import Any

JPEG_SUFFIXES = (".jpg", ".jpeg")
SHARD_SUFFIXES = (".tar", ".zip")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("src", help="folder of JPEGs and tar/ZIP shards (searched recursively), or one .tar or .zip file")
    ap.add_argument("dst", help="folder for the rewritten files (the same relative paths), or the shard to write")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="threads (default: every CPU)")
    ap.add_argument("--strict", action="store_true", help="exit 1 if any JPEG had to be kept unchanged")


def _files(src: pathlib.Path, suffixes: tuple[str, ...]) -> list[pathlib.Path]:
    return sorted(p for p in src.rglob("*") if p.suffix.lower() in suffixes and p.is_file())


@dataclasses.dataclass
class _Tally:
    jpegs: int = 0
    rewritten: int = 0
    kept: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    shards: int = 0
    shards_failed: int = 0

    def add(self, n_in: int, n_out: int, why: str) -> None:
        self.bytes_in += n_in
        self.bytes_out += n_out
        if why:
            self.kept += 1
            print(f"copied unchanged: {why}", file=sys.stderr)
        else:
            self.rewritten += 1


def _rewrite(data, name: str) -> tuple[bytes | None, str]:
    """prepare_jpeg(data), or None and why it cannot be rewritten."""
    import feedline
    import feedline.io

    try:
        return feedline.io.prepare_jpeg(data, name=name), ""
    except (feedline.DecodeError, feedline.UnsupportedFormat) as e:
        return None, str(e)


def _write(out: pathlib.Path, data, what: pathlib.Path) -> None:
    """Writes `data` to `out` through a temporary file, so that a reader
    never sees part of it."""
    tmp = out.with_name(out.name + ".tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        os.replace(tmp, out)
    except OSError as e:
        if tmp.is_file():
            tmp.unlink()  # a full disk leaves no part of a shard behind
        raise OSError(f"{what}: cannot write {out}: {e}") from e


def _run_on_pipeline(items: Iterable, fn: Callable, threads: int, output_order: str = "completion") -> Generator:
    from feedline.pipeline import PipelineBuilder

    pipeline = (
        PipelineBuilder()
        .add_source(items)
        .pipe(fn, concurrency=threads, output_order=output_order)
        .add_sink(threads * 2)
        .build(num_threads=threads)
    )
    with pipeline.auto_stop():
        yield from pipeline


def _prepare_files(src: pathlib.Path, dst: pathlib.Path, threads: int, tally: _Tally) -> None:
    paths = _files(src, JPEG_SUFFIXES)
    tally.jpegs += len(paths)

    def prepare(path: pathlib.Path) -> tuple[int, int, str]:
        """Writes one file; returns (bytes in, bytes out, why it was copied
        unchanged, or '')."""
        out = dst / path.relative_to(src)
        data = path.read_bytes()  # an OSError names the path
        rewritten, why = _rewrite(data, str(path))
        written = data if rewritten is None else rewritten
        _write(out, written, path)
        if why:
            shutil.copystat(path, out)
        return len(data), len(written), why

    for n_in, n_out, why in _run_on_pipeline(paths, prepare, threads):
        tally.add(n_in, n_out, why)


class _Shard:
    """The members of one tar or ZIP shard, read from its file a piece at a
    time with the C++ parser of its format."""

    def __init__(self, path: pathlib.Path) -> None:
        from feedline._feedline_ext import io as _io

        self._io = _io
        self._file = _io.FileReader(str(path))
        self.zip = path.suffix.lower() == ".zip"
        # TarMember or ZipEntry records, by the format.
        self.members: list[Any] = (_io.list_zip if self.zip else _io.list_tar)(self._file)

    def size(self, i: int) -> int:
        return self.members[i].size

    def read(self, i: int, name: str):
        """Member i's bytes, or a str saying why it cannot be rewritten."""
        import feedline

        m = self.members[i]
        if not self.zip:
            if m.pax_size:
                return f"{name}: its size is given by a pax record, which is kept as it is"
            return self._file.read(m.offset, m.size)
        if m.flags & 0x41:
            return f"{name}: the member is encrypted"
        try:  # inflated if need be, its CRC-32 checked
            return self._io.read_zip_entry(self._file, m, 1 << 32)
        except feedline.FormatError as e:
            return str(e)  # names the shard and the member

    def rewriter(self, path: pathlib.Path) -> Any:
        """A C++ ArchiveRewriter from this shard to the file `path`."""
        fn = self._io.rewrite_zip if self.zip else self._io.rewrite_tar
        return fn(self._file, str(path))


def _prepare_shard(path: pathlib.Path, out: pathlib.Path, threads: int, tally: _Tally) -> None:
    """Rewrites the JPEG members of one tar or ZIP shard into `out`, member
    by member as the pipeline gives them back in the shard's order (so only
    the members in flight are in memory); a shard that cannot
    be read, parsed, rewritten or written is reported and counted, and
    nothing of it is left (the JPEGs of one that cannot be written count as
    failed)."""
    import contextlib

    import feedline

    tally.shards += 1
    try:
        shard = _Shard(path)
    except (OSError, feedline.FormatError, feedline.IoError) as e:
        tally.shards_failed += 1
        print(f"failed: {e}", file=sys.stderr)
        return
    jpegs = [i for i, m in enumerate(shard.members) if m.name.lower().endswith((b".jpg", b".jpeg"))]
    tally.jpegs += len(jpegs)
    done = _Tally()  # counted into `tally` once the shard is written

    def prepare(i: int) -> tuple[int, bytes | None, str]:
        """Member i rewritten (or None) and why it was kept unchanged."""
        name = f"{path}:{shard.members[i].name.decode('utf-8', 'surrogateescape')}"
        data = shard.read(i, name)
        if isinstance(data, str):
            return i, None, data
        return i, *_rewrite(data, name)

    tmp = out.with_name(out.name + ".tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        writer = shard.rewriter(tmp)
        place = {i: k for k, i in enumerate(writer.order())}
        jpegs.sort(key=place.__getitem__)
        with contextlib.closing(_run_on_pipeline(jpegs, prepare, threads, "input")) as results:
            for i, rewritten, why in results:
                size = shard.size(i)
                done.add(size, size if rewritten is None else len(rewritten), why)
                if rewritten is not None:
                    writer.replace(i, rewritten)
        writer.finish()
        os.replace(tmp, out)
    except (OSError, ValueError, feedline.FormatError, feedline.IoError) as e:
        if tmp.is_file():
            tmp.unlink()  # a full disk leaves no part of a shard behind
        tally.shards_failed += 1
        # An IoError names the file it was about: the shard, read as it is
        # copied, or the file being written.
        written = isinstance(e, OSError) or (isinstance(e, feedline.IoError) and str(e).startswith(str(tmp)))
        print(f"failed: {path}: cannot write {out}: {e}" if written else f"failed: {e}", file=sys.stderr)
        return
    tally.rewritten += done.rewritten
    tally.kept += done.kept
    tally.bytes_in += done.bytes_in
    tally.bytes_out += done.bytes_out


def run(args: argparse.Namespace) -> int:
    src, dst = pathlib.Path(args.src), pathlib.Path(args.dst)
    one_shard = src.is_file() and src.suffix.lower() in SHARD_SUFFIXES
    if not src.is_dir() and not one_shard:
        print(f"prepare-jpegs: {src} is not a folder, a .tar file or a .zip file", file=sys.stderr)
        return 1
    if args.threads < 1:
        print("prepare-jpegs: --threads must be at least 1", file=sys.stderr)
        return 1
    tally = _Tally()
    if one_shard:
        _prepare_shard(src, dst, args.threads, tally)
    else:
        _prepare_files(src, dst, args.threads, tally)
        for shard in _files(src, SHARD_SUFFIXES):
            _prepare_shard(shard, dst / shard.relative_to(src), args.threads, tally)
    failed = tally.jpegs - tally.rewritten - tally.kept
    grow = f" ({100 * (tally.bytes_out / tally.bytes_in - 1):+.1f}% bytes)" if tally.bytes_in else ""
    print(f"{tally.rewritten} rewritten, {tally.kept} copied unchanged, {failed} failed, of {tally.jpegs} JPEGs{grow}")
    if tally.shards:
        written = tally.shards - tally.shards_failed
        print(f"{written} shards written, {tally.shards_failed} failed, of {tally.shards}")
    return 1 if failed or tally.shards_failed or (args.strict and tally.kept) else 0
