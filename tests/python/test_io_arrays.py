"""NPY/NPZ, WAV, TAR and ZIP: round trips against numpy, wave, tarfile and
zipfile over a matrix of dtypes, shapes and header variants; zero-copy and
lifetime; bad input; native ops."""

import gc
import gzip
import io
import os
import struct
import subprocess
import tarfile
import threading
import wave
import weakref
import zipfile

import numpy as np
import pytest

import feedline
import feedline.io as fio
from feedline.io import ops
from feedline.pipeline import PipelineBuilder

DTYPES = ["?", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4", "f8", "c8", "c16"]
SHAPES = [(), (0,), (5,), (3, 4), (2, 3, 4)]


def npy_bytes(array, version=None):
    b = io.BytesIO()
    np.lib.format.write_array(b, array, version=version)
    return b.getvalue()


def sample(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(shape) * 100).astype(np.dtype(dtype).newbyteorder("="))
    if np.dtype(dtype).kind == "c":
        a = a + 1j * a
    return a.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_npy_round_trip_every_dtype_and_shape(dtype, shape):
    a = sample(dtype, shape)
    got = fio.load_npy(npy_bytes(a))
    assert got.dtype == a.dtype.newbyteorder("=") and got.shape == a.shape
    np.testing.assert_array_equal(got, a)


@pytest.mark.parametrize("byteorder", ["<", ">"])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_npy_header_variants(byteorder, order, version):
    a = np.asarray(sample("f8", (3, 5)).astype(byteorder + "f8"), order=order)
    got = fio.load_npy(npy_bytes(a, version))
    np.testing.assert_array_equal(got, a)
    if order == "F":
        assert got.flags.f_contiguous


def test_npy_is_a_zero_copy_view_that_keeps_its_bytes():
    a = np.arange(10, dtype="<i4")
    raw = bytearray(npy_bytes(a))
    view = fio.load_npy(raw)
    raw[-4:] = struct.pack("<i", 99)  # the array sees the bytes it views
    assert view[-1] == 99
    assert view.flags.writeable  # a bytearray may be written through
    data = npy_bytes(a)
    arr = fio.load_npy(data)
    assert not arr.flags.writeable  # bytes are immutable
    del data
    gc.collect()
    np.testing.assert_array_equal(arr, a)
    owned = fio.load_npy(npy_bytes(a), copy=True)
    assert owned.flags.owndata


def test_npy_from_a_path(tmp_path):
    a = sample("u2", (4, 4))
    np.save(tmp_path / "a.npy", a)
    np.testing.assert_array_equal(fio.load_npy(tmp_path / "a.npy"), a)


@pytest.mark.parametrize("compressed", [False, True])
def test_npz_round_trip_lazily(compressed):
    arrays = {"x": sample("f4", (3, 2)), "y": sample("i8", (7,)), "empty": np.zeros((0, 3))}
    b = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(b, *[arrays["y"]], **arrays)
    z = fio.load_npz(b.getvalue())
    assert sorted(z.files) == ["arr_0", "empty", "x", "y"]
    assert "x" in z and "x.npy" in z and "nope" not in z
    for k, v in arrays.items():
        np.testing.assert_array_equal(z[k], v)
    np.testing.assert_array_equal(z["arr_0.npy"], arrays["y"])
    with pytest.raises(KeyError):
        z["nope"]
    assert repr(z) == "NpzFile object with 4 entries."


def test_zip_stored_deflated_and_zip64():
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as zf:
        zf.writestr("stored.bin", b"abc" * 100, compress_type=zipfile.ZIP_STORED)
        zf.writestr("deflated.bin", b"xyz" * 1000, compress_type=zipfile.ZIP_DEFLATED)
        with zf.open("zip64.bin", "w", force_zip64=True) as f:
            f.write(b"64" * 50)
    z = fio.open_zip(b.getvalue())
    assert bytes(z["stored.bin"]) == b"abc" * 100
    assert bytes(z["deflated.bin"]) == b"xyz" * 1000
    assert bytes(z["zip64.bin"]) == b"64" * 50
    assert z.sizes()["deflated.bin"] == 3000


def test_zip_bomb_is_refused_beyond_the_limit():
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("big.npy", npy_bytes(np.zeros(1_000_000, dtype="u1")))
    z = fio.load_npz(b.getvalue(), max_member_size=100_000)
    with pytest.raises(feedline.FormatError, match="over the limit"):
        z["big"]


def wav_bytes(samples, rate, width):
    b = io.BytesIO()
    with wave.open(b, "wb") as w:
        w.setnchannels(samples.shape[1])
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(samples.tobytes())
    return b.getvalue()


def riff(fmt_chunk, data, extra_chunks_before=(), pad_odd=b""):
    chunks = b"".join(extra_chunks_before) + fmt_chunk + b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", 4 + len(chunks)) + b"WAVE" + chunks


@pytest.mark.parametrize("channels", [1, 2, 6])
@pytest.mark.parametrize(("width", "dtype"), [(1, "u1"), (2, "<i2"), (4, "<i4")])
def test_wav_pcm_round_trip(channels, width, dtype):
    rng = np.random.default_rng(channels)
    info = np.iinfo(dtype)
    s = rng.integers(info.min, info.max, size=(100, channels), dtype=dtype)
    got = fio.load_wav(wav_bytes(s, 16000, width))
    assert got.shape == (100, channels) and got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, s)


def test_wav_24_bit_is_widened_to_int32():
    s = np.array([[0, -1], [8388607, -8388608]], dtype="<i4")
    raw = b"".join(int(v).to_bytes(3, "little", signed=True) for v in s.ravel())
    b = io.BytesIO()
    with wave.open(b, "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(3)
        w.setframerate(8000)
        w.writeframes(raw)
    np.testing.assert_array_equal(fio.load_wav(b.getvalue()), s * 256)


def test_wav_float_extensible_and_odd_chunks():
    s = np.linspace(-1, 1, 40, dtype="<f4").reshape(20, 2)
    fmt = b"fmt " + struct.pack("<IHHIIHH", 16, 3, 2, 8000, 8000 * 8, 8, 32)
    odd = b"LIST" + struct.pack("<I", 3) + b"abc" + b"\x00"  # odd size, padded
    got = fio.load_wav(riff(fmt, s.tobytes(), extra_chunks_before=[odd]))
    np.testing.assert_array_equal(got, s)
    # WAVE_FORMAT_EXTENSIBLE with a float sub-format.
    guid = struct.pack("<H", 3) + b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"
    ext = b"fmt " + struct.pack("<IHHIIHHHHI", 40, 0xFFFE, 2, 8000, 8000 * 8, 8, 32, 22, 32, 3) + guid
    np.testing.assert_array_equal(fio.load_wav(riff(ext, s.tobytes())), s)


def test_wav_windows():
    s = np.arange(200, dtype="<i2").reshape(100, 2)
    data = wav_bytes(s, 100, 2)
    np.testing.assert_array_equal(fio.load_wav(data, time_offset_seconds=0.25, duration_seconds=0.1), s[25:35])
    np.testing.assert_array_equal(fio.load_wav(data, time_offset_seconds=0.9), s[90:])
    with pytest.raises(feedline.FormatError, match="past the end"):
        fio.load_wav(data, time_offset_seconds=2.0)
    info = fio.parse_wav(data)
    assert (info["num_channels"], info["sample_rate"], info["num_frames"]) == (2, 100, 100)
    # SPDL's WAVHeader: attributes, byte_rate and data_size included.
    assert isinstance(info, fio.WAVHeader)
    assert (info.audio_format, info.num_channels, info.sample_rate, info.bits_per_sample) == (1, 2, 100, 16)
    assert (info.block_align, info.byte_rate, info.data_size) == (4, 400, 400)
    with pytest.raises(KeyError):
        info["nope"]
    # Times no frame count holds, and times that are not numbers.
    with pytest.raises(feedline.FormatError, match="past the end"):
        fio.load_wav(data, time_offset_seconds=1e30)
    assert fio.load_wav(data, duration_seconds=1e30).shape == (100, 2)
    for bad in (float("nan"), float("inf"), -1.0):
        with pytest.raises(ValueError, match="time_offset_seconds must be a finite number >= 0"):
            fio.load_wav(data, time_offset_seconds=bad)


def test_wav_sample_rate_past_int_range_is_named():
    data = bytearray(wav_bytes(np.zeros((4, 1), "<i2"), 100, 2))
    struct.pack_into("<I", data, 24, 1 << 31)  # the fmt chunk's sample rate
    with pytest.raises(feedline.FormatError, match="sample rate 2147483648 Hz is out of range"):
        fio.load_wav(bytes(data))


@pytest.mark.parametrize("fmt", [tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
def test_tar_round_trip(tmp_path, fmt):
    long_name = "deep/" + "n" * 120 + ".bin" if fmt != tarfile.USTAR_FORMAT else "deep/dir/file.bin"
    members = {"a.txt": b"hello", long_name: bytes(range(256)) * 3, "empty": b""}
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=fmt) as tf:
        d = tarfile.TarInfo("deep")
        d.type = tarfile.DIRTYPE
        tf.addfile(d)
        for name, data in members.items():
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
        link = tarfile.TarInfo("link")
        link.type = tarfile.SYMTYPE
        link.linkname = "a.txt"
        tf.addfile(link)
    got = [(n, bytes(d)) for n, d in fio.iter_tarfile(b.getvalue())]
    assert got == list(members.items())
    path = tmp_path / "a.tar"
    path.write_bytes(b.getvalue())
    assert [n for n, _ in fio.iter_tarfile(path)] == list(members)
    with open(path, "rb") as f:
        assert [(n, d) for n, d in fio.iter_tarfile(f)] == list(members.items())


class _Stream:
    """A stream that cannot seek, with only read(n), giving at most
    ``piece`` bytes per call; ``pos`` is how far it has been read."""

    def __init__(self, data, piece=1 << 20):
        self._data, self._piece, self.pos = data, piece, 0

    def read(self, n=-1):
        n = len(self._data) - self.pos if n is None or n < 0 else n
        out = self._data[self.pos : self.pos + min(n, self._piece)]
        self.pos += len(out)
        return bytes(out)


class _StreamInto(_Stream):
    """The same with readinto(), keeping the last buffer it was given."""

    kept = None

    def readinto(self, b):
        self.kept = b
        out = self.read(len(b))
        b[: len(out)] = out
        return len(out)


def _tar_of(members, fmt=tarfile.PAX_FORMAT):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=fmt) as tf:
        for name, data in members.items():
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    return b.getvalue()


@pytest.mark.parametrize("readinto", [True, False])
@pytest.mark.parametrize("piece", [1 << 20, 1000])
def test_iter_tarfile_streams_a_file_object(readinto, piece):
    """A file object is read front to back as it is iterated, never more
    than a member and a 4 KiB buffer ahead of what was yielded (it used to
    be read whole first), through readinto() or read(n), whatever each call
    gives."""
    members = {f"m{i:02d}.bin": bytes([i]) * (100_000 * (i % 3) + i) for i in range(24)}
    members["pax/" + "long" * 40] = b"named by a pax record"
    data = _tar_of(members)
    stream = (_StreamInto if readinto else _Stream)(data, piece)
    got, ends = [], []
    offset = 0
    for name, chunk in fio.iter_tarfile(stream):
        assert isinstance(chunk, bytes)
        got.append((name, chunk))
        offset = data.index(chunk, offset) + len(chunk) if chunk else offset
        ends.append((stream.pos, offset))
    assert got == list(members.items())
    assert all(pos <= end + 512 + 4096 for pos, end in ends), ends
    if readinto:
        assert stream.kept is not None
        # The buffers handed to readinto() are released: nothing the stream
        # kept can reach memory that is no longer the stream's.
        with pytest.raises(ValueError, match="released"):
            stream.kept[0]


def test_iter_tarfile_reads_a_pipe_and_a_gzip_stream(tmp_path):
    """The streams a .tar or .tar.gz shard comes as: a pipe (a process's
    output) and gzip.open's decompressor, neither of which can seek."""
    members = {f"{i:06d}.jpg": os.urandom(5000 + i) for i in range(20)}
    path = tmp_path / "s.tar"
    path.write_bytes(_tar_of(members))
    with subprocess.Popen(["cat", str(path)], stdout=subprocess.PIPE) as cat:
        assert dict(fio.iter_tarfile(cat.stdout)) == members
    gz = tmp_path / "s.tar.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    with gzip.open(gz, "rb") as f:
        assert dict(fio.iter_tarfile(f)) == members


def test_iter_tarfile_stream_errors_come_when_reached():
    """A file object is checked as it is read: the members before a damaged
    header come out, then a FormatError naming the stream and the byte; a
    stream cut inside a member, a read() that gives more than asked, no data
    or not bytes, and an exception from read() are errors too."""
    data = bytearray(_tar_of({"a": b"first", "b": b"second", "c": b"third"}))
    second = data.index(b"b\0")
    data[second + 120] ^= 1  # inside the size field: the checksum no longer matches
    stream = _Stream(bytes(data))
    stream.name = "/data/shard.tar"
    it = fio.iter_tarfile(stream)
    assert next(it) == ("a", b"first")
    with pytest.raises(feedline.FormatError, match=f"/data/shard.tar: bad tar header checksum .*at byte {second}"):
        next(it)
    cut = _tar_of({"a": b"x" * 2000})[:1500]
    with pytest.raises(feedline.FormatError, match="<tar stream>: member data overruns the archive"):
        list(fio.iter_tarfile(_Stream(cut)))

    class Odd:
        def __init__(self, gives):
            self.gives = gives

        def read(self, n=-1):
            if isinstance(self.gives, Exception):
                raise self.gives
            return self.gives(n)

    with pytest.raises(feedline.IoError, match=r"<tar stream>: a read of \d+ bytes returned \d+"):
        list(fio.iter_tarfile(Odd(lambda n: b"\0" * (n + 1))))
    with pytest.raises(feedline.IoError, match="no data ready"):
        list(fio.iter_tarfile(Odd(lambda n: None)))
    with pytest.raises(ValueError, match="read\\(\\) returned str, not bytes"):
        list(fio.iter_tarfile(Odd(lambda n: "text")))
    with pytest.raises(ConnectionResetError, match="peer"):
        list(fio.iter_tarfile(Odd(ConnectionResetError("peer went away"))))

    class FailingInto:
        """readinto() that keeps its buffer, then raises."""

        kept = None

        def read(self, n=-1):
            raise AssertionError("readinto() is preferred")

        def readinto(self, b):
            self.kept = b
            raise ConnectionResetError("peer went away")

    failing = FailingInto()
    with pytest.raises(ConnectionResetError, match="peer"):
        list(fio.iter_tarfile(failing))
    with pytest.raises(ValueError, match="released"):
        failing.kept[0]  # the buffer is released even when readinto() raises


def test_iter_tarfile_stream_in_a_reference_cycle_is_collected():
    """A file object that holds its own iterator (or whose class's module
    does) makes a cycle through the native stream: the garbage collector
    sees into the stream and frees both, where it used to leak them (and
    nanobind reported leaks at exit)."""
    stream = _Stream(_tar_of({"a": b"1", "b": b"2"}))
    it = fio.iter_tarfile(stream)
    stream.it = it
    assert next(it) == ("a", b"1")
    gone = weakref.ref(stream)
    del stream, it
    gc.collect()
    assert gone() is None


def test_tar_stream_is_stepped_by_one_thread_at_a_time():
    """read() may let the GIL go: a second thread stepping the same native
    stream meanwhile gets an error instead of corrupting it."""
    from feedline._feedline_ext import io as ext_io

    data = _tar_of({"a": b"abc"})
    inside, release = threading.Event(), threading.Event()

    class Blocking(_Stream):
        def read(self, n=-1):
            inside.set()
            release.wait()
            return super().read(n)

    stream = ext_io.TarStream(Blocking(data), "s.tar")
    got = []
    t = threading.Thread(target=lambda: got.append(next(stream)))
    t.start()
    inside.wait()
    with pytest.raises(ValueError, match="s.tar: already being read by another thread"):
        next(stream)
    release.set()
    t.join()
    assert got == [("a", b"abc")]


def _bytes_read():
    """Bytes this process has read with read() and pread() (rchar)."""
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("rchar:"))


def test_a_zip_path_is_read_a_member_at_a_time(tmp_path):
    """open_zip and load_npz on a path read the directory, then only the
    members asked for (they used to read the whole archive first); close()
    or a with block lets the file go, and reading after it is an error."""
    big = np.zeros(64 << 20, np.uint8)
    path = tmp_path / "a.npz"
    np.savez(path, big=big, small=np.arange(5))
    open_fds = len(os.listdir("/proc/self/fd"))
    before = _bytes_read()
    with fio.load_npz(path) as z:
        np.testing.assert_array_equal(z["small"], np.arange(5))
        assert _bytes_read() - before < 1 << 20
        assert len(os.listdir("/proc/self/fd")) == open_fds + 1
    assert len(os.listdir("/proc/self/fd")) == open_fds
    with pytest.raises(ValueError, match="a.npz: the archive is closed"):
        z["small"]
    zpath = tmp_path / "a.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        zf.writestr("big.bin", bytes(big))
        zf.writestr("a.txt", b"alpha", compress_type=zipfile.ZIP_DEFLATED)
    before = _bytes_read()
    archive = fio.open_zip(zpath)
    assert bytes(archive["a.txt"]) == b"alpha"
    assert _bytes_read() - before < 1 << 20
    assert len(archive["big.bin"]) == big.size
    # Rewritten in place after it was opened: the CRC-32 check tells.
    data = bytearray(zpath.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside big.bin
    zpath.write_bytes(data)
    with pytest.raises(feedline.FormatError, match="a.zip: .*CRC-32 mismatch"):
        archive["big.bin"]


def test_iter_tarfile_reads_a_path_a_member_at_a_time(tmp_path):
    """Headers first, then each member as it is yielded: a 64 MiB member is
    not read before the caller gets to it (the path used to be read whole),
    and a file that shrinks meanwhile is an IoError, not a crash."""
    big = 64 << 20
    path = tmp_path / "s.tar"
    with tarfile.open(path, "w") as tf:
        for name, data in (("a.txt", b"alpha"), ("big.bin", None), ("c.txt", b"gamma")):
            ti = tarfile.TarInfo(name)
            ti.size = big if data is None else len(data)
            tf.addfile(ti, io.BytesIO(data if data is not None else bytes(big)))
    it = fio.iter_tarfile(path)
    before = _bytes_read()
    assert [(n, bytes(d)) for n, d in [next(it)]] == [("a.txt", b"alpha")]
    assert _bytes_read() - before < 1 << 20
    name, data = next(it)
    assert (name, len(data), data[0], data[-1]) == ("big.bin", big, 0, 0)
    assert _bytes_read() - before >= big
    held = next(it)
    del it
    assert (held[0], bytes(held[1])) == ("c.txt", b"gamma")  # outlives the iterator
    # Listed whole, then cut below the big member's end.
    it = fio.iter_tarfile(path)
    next(it)
    os.truncate(path, 4096)
    with pytest.raises(feedline.IoError, match="s.tar: the file ends at byte 4096"):
        next(it)


@pytest.mark.parametrize(
    ("loader", "data", "match"),
    [
        (fio.load_npy, b"\x93NUMPY\x01\x00\x50", "truncated"),
        (fio.load_npy, b"NOTNUMPY", "bad magic"),
        (fio.load_npy, b"\x93NUMPY\x09\x00" + b"\x00" * 8, "version"),
        (fio.load_npz, b"PK\x05\x06" + b"\x00" * 10, "not a ZIP"),
        (fio.load_wav, b"RIFF\x00\x00\x00\x00WAVE", "no fmt"),
        (fio.load_wav, b"RIFF" + b"\x00" * 40, "not a WAV"),
    ],
)
def test_bad_input_raises_format_errors_with_offsets(loader, data, match):
    with pytest.raises(feedline.FormatError, match=match) as info:
        loader(data)
    assert "(at byte " in str(info.value)


def npy_with_header(header):
    h = header.encode()
    h += b" " * (-(len(h) + 11) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h


@pytest.mark.parametrize(
    ("header", "match"),
    [
        ("{'descr': '<f4', 'fortran_order': False, 'shape': (1000,), }", "truncated"),
        ("{'descr': '<q9', 'fortran_order': False, 'shape': (1,), }", "unsupported dtype"),
        ("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", "unsupported dtype"),
        ("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", "negative"),
        ("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 8), }", "overflows"),
        ("{'descr': '<f4', 'shape': (1,), }", "fortran_order"),
    ],
)
def test_malformed_npy_headers(header, match):
    with pytest.raises(feedline.FormatError, match=match):
        fio.load_npy(npy_with_header(header))


def test_tar_with_a_bad_checksum_or_overrun():
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w") as tf:
        ti = tarfile.TarInfo("x")
        ti.size = 600
        tf.addfile(ti, io.BytesIO(b"z" * 600))
    data = bytearray(b.getvalue())
    data[0] ^= 1
    with pytest.raises(feedline.FormatError, match="checksum"):
        list(fio.iter_tarfile(bytes(data)))
    with pytest.raises(feedline.FormatError, match="overruns"):
        list(fio.iter_tarfile(b.getvalue()[:800]))


def test_native_ops_read_a_tar_shard_of_npy_files(tmp_path):
    arrays = [sample("f4", (2, 3), seed=i) for i in range(5)]
    path = tmp_path / "shard.tar"
    path.write_bytes(_tar_of({f"{i}.npy": npy_bytes(a) for i, a in enumerate(arrays)}))
    p = (
        PipelineBuilder()
        .add_source([str(path)])
        .pipe(ops.read_file())
        .pipe(ops.tar_members())
        .pipe(ops.load_npy(), concurrency=2)
        .add_sink(8)
        .build(num_threads=2)
    )
    with p.auto_stop():
        got = [np.asarray(b) for b in p]
    assert sorted(g.sum() for g in got) == sorted(a.sum() for a in arrays)


def test_native_ops_read_archive_members_from_a_path(tmp_path):
    """read_tar_members / read_zip_members take the path itself (str or
    PathLike) and give what read_file -> tar_members / zip_members give,
    reading the file a member at a time; they pickle as their factory
    call; a path that is missing is a counted failure naming it."""
    import pickle

    arrays = [sample("f4", (2, 3), seed=i) for i in range(5)]
    tar_path = tmp_path / "shard.tar"
    tar_path.write_bytes(_tar_of({f"{i}.npy": npy_bytes(a) for i, a in enumerate(arrays)}))
    zip_path = tmp_path / "shard.npz"
    np.savez_compressed(zip_path, **{str(i): a for i, a in enumerate(arrays)})

    def run(source, *stages):
        b = PipelineBuilder().add_source(source)
        for stage in stages:
            b = b.pipe(stage)
        p = b.add_sink(8).build(num_threads=2, max_failures=1)
        with p.auto_stop():
            return [np.asarray(x) for x in p], p

    want = sorted(a.sum() for a in arrays)
    for read_members, path in ((ops.read_tar_members, tar_path), (ops.read_zip_members, zip_path)):
        op = pickle.loads(pickle.dumps(read_members()))
        got, _ = run([path], op, ops.load_npy())
        assert sorted(g.sum() for g in got) == want
        got, p = run([str(path), str(tmp_path / "missing")], read_members(), ops.load_npy())
        assert sorted(g.sum() for g in got) == want
        stage = next(s for s in p.stats().stages if "members" in s.name)
        assert stage.failures == 1


def test_regressions_found_by_the_fuzzers():
    # A zero-size array whose other dimension overflows the strides.
    header = "{'descr': '<c16', 'fortran_order': False, 'shape': (0, 5290767529898624985), }"
    with pytest.raises(feedline.FormatError, match="overflows"):
        fio.load_npy(npy_with_header(header))
    # A pax record whose length does not cover its own digits.
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        pax = tarfile.TarInfo("pax")
        pax.type = tarfile.XHDTYPE
        pax.size = 4
        tf.addfile(pax, io.BytesIO(b"1 x\n"))
    with pytest.raises(feedline.FormatError, match="malformed pax record"):
        list(fio.iter_tarfile(b.getvalue()))


@pytest.mark.parametrize("compressed", [False, True])
def test_native_ops_read_npz_members(tmp_path, compressed):
    arrays = {"a": sample("i4", (4,)), "b": sample("f8", (2, 2))}
    path = tmp_path / "x.npz"
    (np.savez_compressed if compressed else np.savez)(path, **arrays)
    p = (
        PipelineBuilder()
        .add_source([str(path)])
        .pipe(ops.read_file())
        .pipe(ops.zip_members())
        .pipe(ops.load_npy())
        .add_sink(4)
        .build(num_threads=1)
    )
    with p.auto_stop():
        got = sorted((np.asarray(b) for b in p), key=lambda a: a.size)
    np.testing.assert_array_equal(got[0], arrays["a"])
    np.testing.assert_array_equal(got[1], arrays["b"])


def test_paths_are_memory_mapped_on_request(tmp_path):
    a = sample("f4", (64, 64))
    path = tmp_path / "a.npy"
    np.save(path, a)
    assert fio.load_npy(path).flags.writeable  # by default, read: a copy
    got = fio.load_npy(path, mmap_mode="r")
    np.testing.assert_array_equal(got, a)
    assert not got.flags.writeable  # a read-only mapping underneath
    # The array's memory is the file's mapping: it lies in a mapped region of
    # this file, as /proc/self/maps shows.
    addr = got.ctypes.data
    maps = open("/proc/self/maps").read().splitlines()
    region = [line for line in maps if str(path) in line]
    assert any(int(r.split("-")[0], 16) <= addr < int(r.split()[0].split("-")[1], 16) for r in region)
    del got
    gc.collect()


def test_zip_entries_are_a_native_class():
    from feedline._feedline_ext import io as native

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("a.txt", b"hello" * 100)
        z.writestr("b/", b"")
    data = buf.getvalue()
    entries = native.list_zip(data, "t.zip")
    assert [type(e).__name__ for e in entries] == ["ZipEntry", "ZipEntry"]
    a = entries[0]
    assert (a.name, a.size, a.method) == (b"a.txt", 500, 8) and a.compressed_size < 500
    assert bytes(np.asarray(native.read_zip_entry(data, a, "t.zip:a.txt", 1 << 20))) == b"hello" * 100
    with pytest.raises(feedline.FormatError, match="t.zip:a.txt"):
        native.read_zip_entry(data, a, "t.zip:a.txt", 10)
