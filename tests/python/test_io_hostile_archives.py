"""Hostile and damaged input for the loaders without FFmpeg: nothing is lost
or changed silently, every refusal is a typed error naming the input.

Each case is checked against the reference reader (numpy.load, zipfile,
tarfile): feedline must refuse what it refuses, read what it reads alike, and
raise where it would stop early without an error."""

import io
import os
import signal
import struct
import subprocess
import sys
import tarfile
import tokenize
import zipfile
import zlib

import numpy as np
import pytest
from conftest import tar_bytes

import feedline
import feedline.io as fio
from feedline._feedline_ext import io as native
from feedline.io import ops
from feedline.pipeline import PipelineBuilder

# --- ZIP / NPZ: CRC-32 --------------------------------------------------------


def npz_bytes(compressed, **arrays):
    b = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(b, **arrays)
    return b.getvalue()


def flip_in_member(data, member, at):
    """`data` with one byte of `member`'s stored bytes flipped, `at` bytes
    into them."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        info = z.getinfo(member)
    name_len, extra_len = struct.unpack_from("<HH", data, info.header_offset + 26)
    start = info.header_offset + 30 + name_len + extra_len
    damaged = bytearray(data)
    damaged[start + at] ^= 0x01
    return bytes(damaged)


@pytest.mark.parametrize("compressed", [False, True])
def test_npz_member_with_a_flipped_byte_is_an_error_not_data(tmp_path, compressed):
    a = np.arange(1000, dtype="<i4") % 7  # compressible, so savez_compressed deflates
    data = npz_bytes(compressed, a=a, b=np.ones(3))
    # A data byte near the end of the member (inside the array, past the
    # header; for the deflated one, inside the compressed stream).
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        size = z.getinfo("a.npy").compress_size
    damaged = flip_in_member(data, "a.npy", size - 3)
    with pytest.raises(zipfile.BadZipFile):
        np.load(io.BytesIO(damaged))["a"]
    path = tmp_path / "damaged.npz"
    path.write_bytes(damaged)
    for src, name in ((damaged, "<npz of"), (path, str(path))):
        z = fio.load_npz(src)
        with pytest.raises(feedline.FormatError) as info:
            z["a"]
        message = str(info.value)
        assert name in message and "a.npy" in message and "(at byte " in message
        if not compressed:
            assert "CRC-32 mismatch" in message
        np.testing.assert_array_equal(z["b"], np.ones(3))  # the other member is fine
    with pytest.raises(feedline.FormatError, match="a.npy"):
        fio.open_zip(damaged)["a.npy"]


def test_zip_member_with_a_wrong_crc_in_its_directory_is_an_error():
    # The data intact, the central directory's CRC changed: only the check
    # against the directory can tell.
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("x.txt", b"hello " * 100)
    data = bytearray(b.getvalue())
    central = data.rindex(b"PK\x01\x02")
    data[central + 16] ^= 0xFF
    with pytest.raises(zipfile.BadZipFile):
        zipfile.ZipFile(io.BytesIO(bytes(data))).read("x.txt")
    with pytest.raises(feedline.FormatError, match=r"x\.txt.*CRC-32 mismatch"):
        fio.open_zip(bytes(data))["x.txt"]


def test_zip_names_that_are_not_utf8_are_read_as_zipfile_does():
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as z:
        z.writestr("plain.txt", b"1")
    # Rename the member to a CP437/Latin-1 byte (no UTF-8 flag), in both
    # headers, keeping the length.
    data = b.getvalue().replace(b"plain.txt", b"pl\xe9in.txt")
    expected = zipfile.ZipFile(io.BytesIO(data)).namelist()
    archive = fio.open_zip(data)
    assert list(archive) == expected
    assert bytes(archive[expected[0]]) == b"1"


def zip_bytes(*members):
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as z:
        for name, data in members:
            z.writestr(name, data)
    return b.getvalue()


def end_record(data):
    at = data.rfind(b"PK\x05\x06")
    count, size, offset = struct.unpack_from("<HII", data, at + 10)
    return at, count, size, offset


def zipfile_reads(data):
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return [(i.filename, z.read(i)) for i in z.infolist()]


def test_zip_whose_end_record_counts_fewer_members_is_an_error_not_fewer_members():
    data = bytearray(zip_bytes(("a", b"AAA"), ("b", b"BBB"), ("c", b"CCC")))
    at, _, _, _ = end_record(bytes(data))
    struct.pack_into("<HH", data, at + 8, 1, 1)  # 1 member, of 3 in the directory
    assert len(zipfile_reads(bytes(data))) == 3  # zipfile reads the directory's bytes
    with pytest.raises(feedline.FormatError, match="the central directory holds 3 records, the end record says 1"):
        fio.open_zip(bytes(data))


def test_zip_members_sharing_bytes_are_refused_not_inflated_again():
    # Two directory records of one local header: one payload listed twice
    # (a zip bomb lists one deflated megabyte thousands of times).
    data = zip_bytes(("a", b"payload"))
    at, _, size, offset = end_record(data)
    record = data[offset:at]
    data = data[:offset] + record + record + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 2, 2, 2 * size, offset, 0)
    with pytest.raises(feedline.FormatError, match="member 'a' overlaps member 'a'"):
        fio.open_zip(data)
    # Renamed in the directory only: the local header names the other.
    renamed = bytearray(data)
    renamed[offset + size + 46] = ord("b")
    with pytest.raises(zipfile.BadZipFile):
        zipfile_reads(bytes(renamed))
    with pytest.raises(feedline.FormatError, match="the local header of 'b' names 'a'"):
        fio.open_zip(bytes(renamed))


def test_zip_member_of_another_name_in_its_local_header_is_refused():
    data = bytearray(zip_bytes(("good.txt", b"data")))
    data[30:38] = b"evil.txt"
    with pytest.raises(zipfile.BadZipFile):
        zipfile_reads(bytes(data))
    with pytest.raises(feedline.FormatError, match="the local header of 'good.txt' names 'evil.txt'"):
        fio.open_zip(bytes(data))


def test_zip_of_two_members_of_one_name_is_refused_not_one_left_out():
    with pytest.warns(UserWarning, match="Duplicate name"):
        data = zip_bytes(("x", b"first"), ("x", b"second"))
    assert zipfile_reads(data) == [("x", b"first"), ("x", b"second")]
    with pytest.raises(feedline.FormatError, match="two members are named 'x'"):
        fio.open_zip(data)
    with pytest.raises(feedline.FormatError, match="two members are named 'x'"):
        fio.load_npz(data)


def test_encrypted_zip_member_says_so():
    payload = b"hello"
    sealed = bytes(12) + payload  # a ZipCrypto header, then the data
    crc = zlib.crc32(payload)
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 1, 0, 0, 0, crc, len(sealed), len(payload), 1, 0) + b"e"
    central = struct.pack(
        "<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 1, 0, 0, 0, crc, len(sealed), len(payload), 1, 0, 0, 0, 0, 0, 0
    )
    body = local + sealed
    data = body + central + b"e" + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(central) + 1, len(body), 0)
    with pytest.raises(RuntimeError, match="encrypted"):
        zipfile_reads(data)
    with pytest.raises(feedline.FormatError, match="member 'e' is encrypted"):
        bytes(fio.open_zip(data)["e"])


# --- TAR ----------------------------------------------------------------------


def tarfile_members(data):
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        return [(m.name, tf.extractfile(m).read()) for m in tf if m.isreg()]


MEMBERS = [("a.txt", b"x" * 10), ("b.bin", bytes(range(256)) * 3), ("c", b"")]


def test_truncated_tar_raises_unless_cut_between_members():
    data = tar_bytes(MEMBERS)
    full = [(n, bytes(d)) for n, d in fio.iter_tarfile(data)]
    assert full == tarfile_members(data) == MEMBERS
    # Where each header starts: a.txt at 0 (10 bytes of data, one block),
    # b.bin at 1024 (768 bytes, two blocks), c at 2560 (none); the
    # end-of-archive zeros from 3072.
    boundaries = [1024, 2560, 3072]
    for cut in sorted(
        {*range(1, len(data), 97), *boundaries, *(b + 1 for b in boundaries), *(b - 1 for b in boundaries)}
    ):
        piece = data[:cut]
        if cut in boundaries or cut > 3072:  # between members, or in the zeros
            got = [(n, bytes(d)) for n, d in fio.iter_tarfile(piece)]
            assert got == MEMBERS[: boundaries.index(min(cut, 3072)) + 1], cut
            if cut <= 3072:
                assert got == tarfile_members(piece), cut  # tarfile reads the same
            continue
        with pytest.raises(feedline.FormatError) as info:
            list(fio.iter_tarfile(piece))
        assert "(at byte " in str(info.value) and "<tar of" in str(info.value), cut


def test_tar_with_a_garbage_size_field_raises_where_tarfile_stops_early():
    data = bytearray(tar_bytes(MEMBERS))
    second = 1024  # the header of b.bin
    data[second + 124 : second + 136] = b"0000x001400\0"
    # A checksum that matches the damage, so only the field itself is wrong.
    data[second + 148 : second + 156] = b" " * 8
    data[second + 148 : second + 155] = b"%06o\0" % sum(data[second : second + 512])
    data = bytes(data)
    # tarfile silently lists only the first member...
    assert [n for n, _ in tarfile_members(data)] == ["a.txt"]
    # ... feedline raises, naming the field and its offset.
    with pytest.raises(feedline.FormatError, match=r"size field is not an octal number \(at byte 1148\)"):
        list(fio.iter_tarfile(data))


def test_tar_member_names_that_are_not_utf8_read_like_tarfile(tmp_path):
    names = ["caf\xe9.txt", "d\xe9j\xe0/vu.bin", "plain"]
    for fmt in (tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT):
        data = tar_bytes([(n, n.encode("latin-1")) for n in names], fmt=fmt, encoding="latin-1")
        expected = tarfile_members(data)
        got = [(n, bytes(d)) for n, d in fio.iter_tarfile(data)]
        assert got == expected
        assert os.fsencode(got[0][0]) == b"caf\xe9.txt"
        path = tmp_path / "latin1.tar"
        path.write_bytes(data)
        with open(path, "rb") as f:
            assert [n for n, _ in fio.iter_tarfile(f)] == [n for n, _ in expected]
    # A GNU long name (over 100 bytes) that is not UTF-8.
    long_name = "x" * 120 + "\xe9.bin"
    data = tar_bytes([(long_name, b"1")], encoding="latin-1")
    assert [n for n, _ in fio.iter_tarfile(data)] == [n for n, _ in tarfile_members(data)]


def test_native_ops_name_a_latin1_member_in_a_typed_error(tmp_path):
    path = tmp_path / "l1.tar"
    path.write_bytes(tar_bytes([("caf\xe9.npy", b"not an npy")], encoding="latin-1"))
    p = (
        PipelineBuilder()
        .add_source([str(path)])
        .pipe(ops.read_file())
        .pipe(ops.tar_members())
        .pipe(ops.load_npy())
        .add_sink(2)
        .build(num_threads=1, max_failures=0)
    )
    with pytest.raises(feedline.PipelineFailure) as info:
        with p.auto_stop():
            list(p)
    # The stage's error reaches the consumer as text (the failure budget's
    # report), which a Latin-1 name used to make invalid UTF-8: a
    # UnicodeDecodeError instead of the failure.
    (cause,) = info.value.exceptions
    assert isinstance(cause, feedline.TooManyFailures)
    assert "caf\\xe9.npy: not an NPY file" in str(cause)


def test_tar_extended_header_with_no_member_after_it_is_an_error():
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=tarfile.PAX_FORMAT) as tf:
        ti = tarfile.TarInfo("ä" * 200)  # non-ASCII and long: needs a pax header
        ti.size = 1
        tf.addfile(ti, io.BytesIO(b"1"))
    data = b.getvalue()[:1024]  # the pax header and its records only
    with pytest.raises(tarfile.ReadError):
        tarfile_members(data)
    with pytest.raises(feedline.FormatError, match="no member after it"):
        list(fio.iter_tarfile(data))


def pax_block(kind, records):
    """A pax header of `kind` ('x', 'X' or 'g') holding `records`."""
    body = b""
    for key, value in records:
        text = f" {key}={value}\n".encode()
        n = len(text) + 1
        while len(str(n)) + len(text) != n:
            n += 1
        body += str(n).encode() + text
    info = tarfile.TarInfo("PaxHeader")
    info.size, info.type = len(body), kind.encode()
    header = info.tobuf(format=tarfile.USTAR_FORMAT)
    return header + body + bytes(-len(body) % 512)


def test_tar_solaris_pax_header_and_a_global_header_between_pax_and_member():
    long = "a/very/long/" + "n" * 120
    member = tar_bytes([("short", b"hi")], fmt=tarfile.USTAR_FORMAT)
    solaris = pax_block("X", [("path", long)]) + member
    assert tarfile_members(solaris) == [(long, b"hi")]
    assert [(n, bytes(d)) for n, d in fio.iter_tarfile(solaris)] == [(long, b"hi")]
    # x (size 4 for the member), then g: the 4 is the member's, not g's.
    four = tar_bytes([("named", b"MMMM")], fmt=tarfile.USTAR_FORMAT)
    mixed = pax_block("x", [("size", "4")]) + pax_block("g", [("comment", "global")]) + four
    assert tarfile_members(mixed) == [("named", b"MMMM")]
    assert [(n, bytes(d)) for n, d in fio.iter_tarfile(mixed)] == [("named", b"MMMM")]


# --- NPY: the header, against numpy.load --------------------------------------

ROWS = np.arange(6, dtype="<i4")


def npy_with(header, version=(1, 0)):
    h = header.encode("latin-1")
    size = struct.pack("<H" if version[0] == 1 else "<I", len(h))
    return b"\x93NUMPY" + bytes(version) + size + h + ROWS.tobytes()


# Headers numpy.load reads and feedline reads alike.
READ_ALIKE = [
    "{'descr': '<i4', 'fortran_order': False, 'shape': (6,), }",
    "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }" + " " * 40 + "\n",
    "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3)}",
    '{"shape": (3, 2), "descr": "<i4", "fortran_order": False}',
    "{'descr':'<i4','fortran_order':False,'shape':(6,)}",
    " \t{'descr': '<i4', 'fortran_order': False, 'shape': (1, 6,)}\n\n  \n",
    "{\n'descr': '<i4',\n\t'fortran_order': False,\n'shape': (\n6\n,\n)\n}",
    "{'descr': '<i4', 'fortran_order': False, 'shape': ()}",
    "{'descr': '<i4', 'fortran_order': False, 'shape': (0, 4)}",
    "{'descr': '|u1', 'fortran_order': False, 'shape': (24,)}",
    "{'descr': '>i4', 'fortran_order': False, 'shape': (6,)}",
    "{'descr': '=i4', 'fortran_order': False, 'shape': (6,)}",
    "{'descr': '|i4', 'fortran_order': False, 'shape': (6,)}",
]

# Headers numpy.load refuses: feedline must refuse them too.
NUMPY_REFUSES = [
    "{'descr': '<i4', 'shape': (6,)}",  # a key missing
    "{'descr': '<i4', 'fortran_order': False, 'shape': (6,), 'extra': 1}",  # an extra key
    "{'descr': '<i4', 'fortran_order': False}",
    "{}",
    "{'descr': '<i4', 'fortran_order': 0, 'shape': (6,)}",  # not a bool
    "{'descr': '<i4', 'fortran_order': 'False', 'shape': (6,)}",
    "{'descr': '<i4', 'fortran_order': Falsey, 'shape': (6,)}",
    "{'descr': '<i4', 'fortran_order': False, 'shape': (6)}",  # an int, not a tuple
    "{'descr': '<i4', 'fortran_order': False, 'shape': [6]}",
    "{'descr': '<i4', 'fortran_order': False, 'shape': 6}",
    "{'descr': '<i4', 'fortran_order': False, 'shape': (6.0,)}",
    "{'descr': '<i4', 'fortran_order': False, 'shape': (-6,)}",
    "{'descr': '<i4', 'fortran_order': False, 'shape': (-1, 6)}",
    "{'descr': '<i4', 'fortran_order': False, 'shape': (06,)}",  # a leading zero
    "{'descr': '<i4', 'fortran_order': False, 'shape': (6,,)}",
    "{'descr': '<i4', 'fortran_order': False, 'shape': (,)}",
    "{'descr': '<i4', 'fortran_order': False, 'shape': (2 3,)}",
    "{'descr': '<i4', 'fortran_order': False, 'shape': (True, 6)}",
    "{'descr': '<i4', 'fortran_order': False, 'shape': (7,)}",  # more than the data
    "{'descr': '<i4', 'fortran_order': False, 'shape': (99999999999999999999999,)}",
    "{'descr': 4, 'fortran_order': False, 'shape': (6,)}",
    "{'descr': '<i3', 'fortran_order': False, 'shape': (6,)}",
    "{'descr': '<q4', 'fortran_order': False, 'shape': (6,)}",
    "{'descr': '<i4', 'fortran_order': False, 'shape': (6,)",  # not closed
    "{'descr': '<i4', 'fortran_order': False, 'shape': (6,)} trailing",
    "{'descr': '<i4', 'fortran_order': False, 'shape': (6,)}}",
    "{'descr': '<i4', 'fortran_order': False, 'shape': (6,)}\0",
    "{'descr': '<i4' 'fortran_order': False, 'shape': (6,)}",
    "{'descr': '<i4',, 'fortran_order': False, 'shape': (6,)}",
    "{'descr: '<i4', 'fortran_order': False, 'shape': (6,)}",
    "dict(descr='<i4', fortran_order=False, shape=(6,))",
    "['descr', '<i4']",
    "",
]

# Headers numpy.load reads that feedline refuses on purpose: duplicated keys
# (numpy takes the last; no writer makes them) and Python literal syntax no
# NPY writer uses. Refusing is safe; reading them differently is not.
FEEDLINE_REFUSES = [
    "{'descr': '<i4', 'fortran_order': False, 'shape': (6,), 'shape': (2, 3)}",
    "{'descr': '<u4', 'descr': '<i4', 'fortran_order': False, 'shape': (6,)}",
    "{'descr': '<i4', 'fortran_order': True, 'fortran_order': False, 'shape': (2, 3)}",
    "{'descr': '<i4', 'fortran_order': False, 'shape': (0x6,)}",
    "{'descr': '<i4', 'fortran_order': False, 'shape': (+6,)}",
    "{'descr': '<i4', 'fortran_order': False, 'shape': (0_0,)}",
    "{'descr': '\\x3ci4', 'fortran_order': False, 'shape': (6,)}",
    "{'descr': u'<i4', 'fortran_order': False, 'shape': (6,)}",
    "{'descr': '<' 'i4', 'fortran_order': False, 'shape': (6,)}",
    "{'descr': 'i4', 'fortran_order': False, 'shape': (6,)}",
    "{'descr': '<i4', 'fortran_order': False, 'shape': (6,)} # a comment",
    "{'descr': '<i4', 'fortran_order': False, 'shape': (6,)}\r\n",
    "\n{'descr': '<i4', 'fortran_order': False, 'shape': (6,)}",
]


def numpy_load(data):
    return np.load(io.BytesIO(data), allow_pickle=False)


@pytest.mark.parametrize("header", READ_ALIKE)
@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_npy_headers_numpy_reads_give_the_same_array(header, version):
    data = npy_with(header, version)
    expected = numpy_load(data)
    got = fio.load_npy(data)
    assert got.dtype == expected.dtype.newbyteorder("=") and got.shape == expected.shape
    assert got.flags.f_contiguous == expected.flags.f_contiguous
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("header", NUMPY_REFUSES)
def test_npy_headers_numpy_refuses_are_format_errors(header):
    data = npy_with(header)
    with pytest.raises((ValueError, SyntaxError, OverflowError, TypeError, tokenize.TokenError)):
        numpy_load(data)
    with pytest.raises(feedline.FormatError) as info:
        fio.load_npy(data)
    assert "(at byte " in str(info.value)


@pytest.mark.parametrize("header", FEEDLINE_REFUSES)
def test_npy_headers_refused_although_numpy_reads_them(header):
    data = npy_with(header)
    numpy_load(data)  # numpy reads it...
    with pytest.raises(feedline.FormatError):  # ... feedline refuses, not misreads
        fio.load_npy(data)


def test_npy_duplicate_keys_are_refused_not_read_differently():
    data = npy_with("{'descr': '<i4', 'fortran_order': False, 'shape': (6,), 'shape': (2, 3)}")
    assert numpy_load(data).shape == (2, 3)  # numpy: the last one wins
    with pytest.raises(feedline.FormatError, match="repeats the key 'shape'"):
        fio.load_npy(data)


def test_npy_versions_and_header_length_as_numpy():
    header = "{'descr': '<i4', 'fortran_order': False, 'shape': (6,)}"
    for version in [(1, 1), (2, 5), (0, 0), (4, 0)]:
        data = npy_with(header, version)
        with pytest.raises(ValueError):
            numpy_load(data)
        with pytest.raises(feedline.FormatError, match="version"):
            fio.load_npy(data)
    # numpy refuses headers over 10000 bytes (max_header_size), padding
    # included.
    at_limit = header + " " * (10000 - len(header) - 1) + "\n"
    np.testing.assert_array_equal(fio.load_npy(npy_with(at_limit, (2, 0))), numpy_load(npy_with(at_limit, (2, 0))))
    over = npy_with(at_limit + " ", (2, 0))
    with pytest.raises(ValueError):
        numpy_load(over)
    with pytest.raises(feedline.FormatError, match="limit"):
        fio.load_npy(over)


def test_npy_python2_long_suffix_read_as_numpy_reads_it():
    # Python 2 on Windows wrote dimensions as longs: "(2L, 3L)". numpy strips
    # the suffix in versions 1.0 and 2.0 (with a warning), not in 3.0.
    header = "{'descr': '<i4', 'fortran_order': False, 'shape': (2L, 3L), }"
    for version in [(1, 0), (2, 0)]:
        data = npy_with(header, version)
        with pytest.warns(UserWarning, match="Python 2"):
            expected = numpy_load(data)
        np.testing.assert_array_equal(fio.load_npy(data), expected)
    data = npy_with(header, (3, 0))
    with pytest.raises(ValueError):
        numpy_load(data)
    with pytest.raises(feedline.FormatError):
        fio.load_npy(data)
    for shape in ["(6LL,)", "(6l,)", "(L,)", "(6L)"]:
        data = npy_with("{'descr': '<i4', 'fortran_order': False, 'shape': " + shape + "}")
        with pytest.raises(ValueError):
            numpy_load(data)
        with pytest.raises(feedline.FormatError):
            fio.load_npy(data)


def test_npz_member_with_a_duplicate_key_header_is_refused():
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as z:
        z.writestr("a.npy", npy_with("{'descr': '<i4', 'fortran_order': False, 'shape': (6,), 'shape': (2, 3)}"))
    with pytest.raises(feedline.FormatError, match=r"a\.npy.*repeats the key"):
        fio.load_npz(b.getvalue())["a"]


# --- Paths: read, not mapped, by default --------------------------------------


def test_a_loaded_path_survives_truncation_of_its_file(tmp_path):
    a = np.arange(64 * 1024, dtype="<f4")  # 256 KiB: many pages
    path = tmp_path / "a.npy"
    np.save(path, a)
    got = fio.load_npy(path)
    got_npz_path = tmp_path / "a.npz"
    np.savez(got_npz_path, a=a, b=a)
    npz = fio.load_npz(got_npz_path)
    taken = npz["a"]
    tar_path = tmp_path / "a.tar"
    tar_path.write_bytes(tar_bytes([("a.npy", path.read_bytes())]))
    members = list(fio.iter_tarfile(tar_path))
    for p in (path, got_npz_path, tar_path):
        os.truncate(p, 0)  # what another process may do
    np.testing.assert_array_equal(got, a)  # unchanged, and no SIGBUS
    np.testing.assert_array_equal(taken, a)
    np.testing.assert_array_equal(fio.load_npy(members[0][1]), a)
    assert got.flags.writeable  # a copy of its own
    # An NPZ archive's members are read as they are asked for (as numpy.load
    # reads them): one asked for after the cut is an error naming the file.
    with pytest.raises(feedline.IoError, match="a.npz: the file ends at byte 0, shorter than"):
        npz["b"]


def test_mmap_mode_other_than_r_is_refused(tmp_path):
    path = tmp_path / "a.npy"
    np.save(path, np.arange(3))
    for mode in ("r+", "w+", "c", "x"):
        with pytest.raises(ValueError, match="mmap_mode"):
            fio.load_npy(path, mmap_mode=mode)


def test_mmap_mode_r_and_a_truncated_file_is_the_documented_sigbus(tmp_path):
    """The hazard the opt-in documents, in a child process: a mapped result
    whose file shrinks faults when its lost pages are touched."""
    path = tmp_path / "a.npy"
    np.save(path, np.ones(64 * 1024, dtype="<f8"))
    code = f"""
import os, feedline.io as fio
a = fio.load_npy({str(path)!r}, mmap_mode="r")
os.truncate({str(path)!r}, 0)
print(float(a[-1]))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert result.returncode == -signal.SIGBUS, result


# --- Paths with a NUL ----------------------------------------------------------


def test_paths_with_a_nul_are_refused_not_cut(tmp_path):
    real = tmp_path / "a.npy"
    np.save(real, np.arange(3))
    hostile = str(real) + "\0.txt"  # cut at the NUL, it would open a.npy
    escaped = repr(hostile)[1:-1]
    for load in (
        fio.load_npy,
        fio.load_npz,
        fio.open_zip,
        fio.load_wav,
        fio.parse_wav,
        lambda p: list(fio.iter_tarfile(p)),
        lambda p: fio.load_npy(p, mmap_mode="r"),
        native.read_file,
        native.map_file,
    ):
        with pytest.raises(ValueError, match="NUL") as info:
            load(hostile)
        assert escaped in str(info.value)


def test_read_file_op_refuses_a_path_with_a_nul(tmp_path):
    real = tmp_path / "a.bin"
    real.write_bytes(b"abc")
    p = (
        PipelineBuilder()
        .add_source([str(real) + "\0x", str(real)])
        .pipe(ops.read_file())
        .add_sink(2)
        .build(num_threads=1)
    )
    with p.auto_stop():
        got = [bytes(b) for b in p]
    assert got == [b"abc"]  # the hostile path failed, counted; not read as a.bin
    assert sum(stage.failures for stage in p.stats().stages) == 1
