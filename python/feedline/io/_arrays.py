"""NPY/NPZ, WAV, TAR and ZIP without FFmpeg: zero-copy views of the bytes.

The parsing runs in C++ with the GIL released; results are NumPy arrays that
view the input bytes and keep them alive. A path is read into memory (NPY,
WAV) or a piece at a time (the members of a tar or ZIP archive, as they are
asked for), or, with ``mmap_mode="r"``, memory-mapped. Beyond that, a copy
happens only when it must: a deflated member is inflated, big-endian data
is swapped, 24-bit audio is widened to int32.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterator, Mapping

import numpy as np

from .._feedline_ext import FormatError as _FormatError
from .._feedline_ext import io as _io

__all__ = ["NpzFile", "ZipArchive", "iter_tarfile", "load_npy", "load_npz", "load_wav", "open_zip"]


def _source(src, what, mmap_mode=None):
    """(bytes-like or Buffer, name) for a path or bytes-like ``src``. A path
    is read into memory; with ``mmap_mode="r"`` it is memory-mapped read-only
    instead (results view the file's pages)."""
    if mmap_mode not in (None, "r"):
        raise ValueError(f"mmap_mode must be None or 'r' (a read-only mapping), got {mmap_mode!r}")
    if isinstance(src, (str, os.PathLike)):
        path = os.fspath(src)
        return (_io.map_file(path) if mmap_mode == "r" else _io.read_file(path)), path
    return src, f"<{what} of {len(memoryview(src).cast('B')) if not isinstance(src, _io.Buffer) else src.nbytes} bytes>"


def load_npy(data, *, copy: bool = False, mmap_mode: str | None = None) -> np.ndarray:
    """Loads an NPY file held in ``data`` (bytes-like) or at a path.

    Returns a NumPy array viewing the bytes (``copy=False``): a ``bytes``
    object is kept alive by the array; changes to a ``bytearray`` show
    through. Fortran order and big-endian data are honoured (the latter with
    one copy). The header is read as strictly as ``numpy.load`` reads it.
    Raises :class:`feedline.FormatError` naming the offset of the problem.

    ``mmap_mode=None`` (the default) reads a path into memory, so the
    result never changes and never faults if the file is changed or
    truncated later. ``mmap_mode="r"`` maps the file read-only instead, as
    ``numpy.load(mmap_mode="r")`` does: nothing is read up front and results
    view the file's pages, but the file must not shrink while any result is
    alive (touching a page past its new end kills the process with SIGBUS)
    and changes to it show through. Ignored for bytes-like ``data``.
    """
    src, name = _source(data, "npy", mmap_mode)
    array = np.asarray(_io.load_npy(src, name))
    return array.copy() if copy else array


def _zip_name(raw: bytes) -> str:
    """A ZIP member name: UTF-8, or else CP437 (the ZIP default that zipfile
    also uses for names without the UTF-8 flag)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("cp437")


def _open_zip(src, what, mmap_mode):
    """(archive, entries, name) of a ZIP archive in ``src``. A path is opened
    (a FileReader), its directory read, and each member read when asked
    for, as ``numpy.load`` and ``zipfile`` read them; with ``mmap_mode="r"``
    it is mapped. Bytes-like data is read in place."""
    if mmap_mode is None and isinstance(src, (str, os.PathLike)):
        file = _io.FileReader(os.fspath(src))
        return file, _io.list_zip(file), file.path
    data, name = _source(src, what, mmap_mode)
    return data, _io.list_zip(data, name), name


class _ZipMembers:
    """What NpzFile and ZipArchive share: the members by name, each read
    (from the bytes, or from the file) when asked for, and close()."""

    def __init__(self, archive, entries, name, max_size):
        self._archive = archive
        self._entries = _by_name(entries, name)
        self._name = name
        self._max_size = max_size

    def _read(self, entry):
        """The member's bytes (a Buffer): CRC-32 and size checked."""
        if self._archive is None:
            raise ValueError(f"{self._name}: the archive is closed")
        if isinstance(self._archive, _io.FileReader):
            return _io.read_zip_entry(self._archive, entry, self._max_size)
        return _io.read_zip_entry(self._archive, entry, f"{self._name}:{_zip_name(entry.name)}", self._max_size)

    def __len__(self):
        return len(self._entries)

    def close(self) -> None:
        """Lets the archive go (a path's file is closed once no member read
        is in progress); members read before stay valid. Reading after it
        raises ValueError."""
        self._archive = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _by_name(entries, archive: str) -> dict:
    """The members of a ZIP archive by name. Two members of one name would
    make one of them unreachable (a mapping keeps one value per key), so
    they are refused rather than one left out silently."""
    out: dict = {}
    for e in entries:
        key = _zip_name(e.name)
        if key in out:
            raise _FormatError(f"{archive}: two members are named {key!r}")
        out[key] = e
    return out


class NpzFile(_ZipMembers, Mapping):
    """A lazy, read-only mapping of the arrays in an NPZ archive.

    Keys work with or without ``.npy``; ``files`` lists them without it.
    Each access parses (and, for compressed archives, inflates) that one
    member; stored members of bytes in memory are zero-copy views of them.
    ``close()``, or a ``with`` block, lets a path's file go.
    """

    def __init__(self, archive, entries, name, max_size):
        super().__init__(archive, entries, name, max_size)
        self.files = [k[:-4] if k.endswith(".npy") else k for k in self._entries]

    def _entry(self, key):
        for candidate in (key, key + ".npy"):
            if candidate in self._entries:
                return self._entries[candidate]
        raise KeyError(f"{key!r} is not in the archive {self._name}")

    def __getitem__(self, key) -> np.ndarray:
        entry = self._entry(key)
        return np.asarray(_io.load_npy(self._read(entry), f"{self._name}:{_zip_name(entry.name)}"))

    def __contains__(self, key):
        return key in self._entries or key + ".npy" in self._entries

    def __iter__(self):
        return iter(self.files)

    def __repr__(self):
        return f"NpzFile object with {len(self)} entries."


def load_npz(data, *, max_member_size: int = 1 << 32, mmap_mode: str | None = None) -> NpzFile:
    """Opens an NPZ archive (stored or deflate-compressed, zip64 included)
    held in ``data`` or at a path. ``max_member_size`` bounds what one member
    may inflate to (a zip-bomb guard). Each member is checked against its
    CRC-32 when read: a damaged one raises :class:`feedline.FormatError`.

    A path is opened and only its directory read; each array is read from
    the file when asked for (as ``numpy.load`` does), so an archive of any
    size costs the arrays taken. A file that shrinks after it was opened
    raises :class:`feedline.IoError` naming it; one rewritten in place, a
    CRC-32 mismatch. With ``mmap_mode="r"`` it is mapped instead (see
    :func:`load_npy`).
    """
    archive, entries, name = _open_zip(data, "npz", mmap_mode)
    return NpzFile(archive, entries, name, max_member_size)


class ZipArchive(_ZipMembers, Mapping):
    """A read-only mapping from member names to their bytes (memoryviews of
    the archive for stored members of bytes in memory; copies for deflated
    ones and for a path's members). ``close()``, or a ``with`` block, lets a
    path's file go."""

    def __getitem__(self, key) -> memoryview:
        return np.asarray(self._read(self._entries[key])).data

    def __iter__(self):
        return iter(self._entries)

    def sizes(self):
        """{name: uncompressed size}."""
        return {k: e.size for k, e in self._entries.items()}


def open_zip(data, *, max_member_size: int = 1 << 32, mmap_mode: str | None = None) -> ZipArchive:
    """Opens a ZIP archive held in ``data`` or at a path. Members are checked
    against their CRC-32 and size when read; names are decoded as UTF-8, or
    CP437 when they are not UTF-8.

    A path is opened and only its directory read; each member is read from
    the file when asked for, so a ZIP of any size costs the members taken.
    A file that shrinks after it was opened raises :class:`feedline.IoError`
    naming it; one rewritten in place, a CRC-32 mismatch. With
    ``mmap_mode="r"`` it is mapped instead (see :func:`load_npy`).
    """
    archive, entries, name = _open_zip(data, "zip", mmap_mode)
    return ZipArchive(archive, entries, name, max_member_size)


def _frames_in(what: str, seconds: float, rate: int) -> int:
    """Whole frames in ``seconds`` at ``rate``: a finite time >= 0, the
    count capped at 2^63 (past any file's end, which load_wav reports)."""
    if not (math.isfinite(seconds) and seconds >= 0):
        raise ValueError(f"{what} must be a finite number >= 0, got {seconds}")
    return min(int(seconds * rate), 1 << 63)


def load_wav(
    data,
    time_offset_seconds: float | None = None,
    duration_seconds: float | None = None,
    *,
    mmap_mode: str | None = None,
) -> np.ndarray:
    """Loads the samples of a WAV file as ``(frames, channels)``: uint8,
    int16, int32 (24-bit widened, 32-bit PCM), float32 or float64, a view of
    the bytes (24-bit: a copy). Odd chunk layouts and WAVE_FORMAT_EXTENSIBLE
    are handled. With a window, only those frames.

    A path is read into memory, or with ``mmap_mode="r"`` mapped; see
    :func:`load_npy`.
    """
    src, name = _source(data, "wav", mmap_mode)
    start, frames = 0, None
    if time_offset_seconds is not None or duration_seconds is not None:
        rate = _io.parse_wav(src, name).sample_rate
        if time_offset_seconds is not None:
            start = _frames_in("time_offset_seconds", time_offset_seconds, rate)
        if duration_seconds is not None:
            frames = _frames_in("duration_seconds", duration_seconds, rate)
    return np.asarray(_io.load_wav(src, name, start, frames))


@dataclasses.dataclass(frozen=True)
class WAVHeader:
    """A WAV file's header, as :func:`parse_wav` reads it: SPDL's fields
    (``data_size``: the bytes of samples present), and ``num_frames`` and
    ``data_offset``. Fields read as attributes or, as the dict it once was,
    by name (``header["sample_rate"]``)."""

    audio_format: int
    num_channels: int
    sample_rate: int
    byte_rate: int
    block_align: int
    bits_per_sample: int
    data_size: int
    num_frames: int
    data_offset: int

    def __getitem__(self, key: str) -> int:
        if key not in self.__dataclass_fields__:
            raise KeyError(key)
        return getattr(self, key)

    def keys(self) -> list[str]:
        return list(self.__dataclass_fields__)


def parse_wav(data, *, mmap_mode: str | None = None) -> WAVHeader:
    """The WAV header (:class:`WAVHeader`). A path is read (or, with
    ``mmap_mode="r"``, mapped) as in :func:`load_wav`."""
    src, name = _source(data, "wav", mmap_mode)
    info = _io.parse_wav(src, name)
    return WAVHeader(
        audio_format=info.audio_format,
        num_channels=info.num_channels,
        sample_rate=info.sample_rate,
        byte_rate=info.sample_rate * info.block_align,
        block_align=info.block_align,
        bits_per_sample=info.bits_per_sample,
        data_size=info.num_frames * info.block_align,
        num_frames=info.num_frames,
        data_offset=info.data_offset,
    )


# Members of a tar read from a path are read this many bytes at a time
# (or one member, when larger): one read for many small members.
_TAR_CHUNK = 4 << 20


def _iter_tar_path(path: str) -> Iterator[tuple[str, memoryview]]:
    """iter_tarfile() of a path: the headers, then the members' data read a
    chunk of consecutive members at a time, each yielded as a view of its
    chunk (which a held view keeps alive)."""
    file = _io.FileReader(path)
    members = [(m.name, m.offset, m.offset + m.size) for m in _io.list_tar(file)]
    k = 0
    while k < len(members):
        start, end, j = members[k][1], members[k][2], k + 1
        while j < len(members) and members[j][2] - start <= _TAR_CHUNK:
            end, j = members[j][2], j + 1
        chunk = np.asarray(file.read(start, end - start)).data.cast("B")
        for name, begin, stop in members[k:j]:
            yield name.decode("utf-8", "surrogateescape"), chunk[begin - start : stop - start]
        k = j


def iter_tarfile(src, *, mmap_mode: str | None = None) -> Iterator[tuple[str, memoryview | bytes]]:
    """Yields ``(name, data)`` for each regular file of a tar archive.

    ``src`` is bytes-like or a path (data: zero-copy memoryviews of the
    archive, or of the file read into memory), or a file-like object with
    ``readinto()`` or ``read(n)``: a pipe, a socket, a decompressor, a
    response body (read front to back as a stream, in the memory of one
    member; data: bytes). ustar, GNU long names and pax path/size records
    are handled; directories and links are skipped. Names are decoded as
    ``tarfile`` decodes them: UTF-8, with bytes that are not UTF-8 (a
    Latin-1 name, say) kept as lone surrogates
    (``errors="surrogateescape"``; ``os.fsencode(name)`` gives the bytes
    back).

    A damaged archive (a bad checksum, a numeric field that is not a
    number, a header, member or padding cut short) raises
    :class:`feedline.FormatError` naming the archive and the byte offset,
    where ``tarfile`` would often stop early without an error. The whole
    archive is checked before the first member is yielded, except from a
    file object, which is checked as it is read: the members before the
    damage come out first. The archive ends at a zero block, or where the
    input ends right after a member.

    A path is read a piece at a time: its headers are read and checked
    first, then the members' data as they are yielded, 4 MiB of consecutive
    members (or one larger member) per read, each a memoryview of that
    piece, so a tar of any size needs only the pieces the caller holds; a
    file that shrinks meanwhile raises :class:`feedline.IoError` naming it.
    With ``mmap_mode="r"`` it is mapped instead (see :func:`load_npy`).
    """
    if isinstance(src, (str, os.PathLike)) and mmap_mode is None:
        yield from _iter_tar_path(os.fspath(src))
        return
    if hasattr(src, "read") and not isinstance(src, (bytes, bytearray, memoryview)):
        name = getattr(src, "name", "<tar stream>")
        yield from _io.TarStream(src, name if isinstance(name, str) else "<tar stream>")
        return
    data, name = _source(src, "tar", mmap_mode)
    members = _io.list_tar(data, name)
    array = np.asarray(data) if isinstance(data, _io.Buffer) else np.frombuffer(data, np.uint8)
    view = array.data.cast("B")
    for member in members:
        yield member.name.decode("utf-8", "surrogateescape"), view[member.offset : member.offset + member.size]
