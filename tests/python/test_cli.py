"""``python -m feedline info`` and ``python -m feedline demo``, run as a user
runs them: in a subprocess, from a directory outside the repository."""

import io
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import feedline
from feedline.io import utils


def run_feedline(tmp_path, *args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "feedline", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def test_info_reports_versions_decoders_cpus_and_build(tmp_path):
    done = run_feedline(tmp_path, "info")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert f"feedline: {feedline.__version__}" in lines
    python = f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}"
    assert any(line.startswith(f"python: {python} (CPython") for line in lines)
    assert f"cpu count: {os.cpu_count()} ({len(os.sched_getaffinity(0))} usable by this process)" in lines
    for lib, (major, minor, micro) in utils.get_ffmpeg_versions().items():
        assert f"  {lib}: {major}.{minor}.{micro}" in lines
    for lib, version in utils.get_library_versions().items():
        assert f"  {lib}: {version}" in lines
    assert any(re.fullmatch(r"  libjpeg-turbo: \d+\.\d+\.\d+", line) for line in lines)
    assert any(re.fullmatch(r"  libpng: \d+\.\d+\.\d+", line) for line in lines)
    # Decoders this FFmpeg has for certain (the tests decode them); others
    # are listed either way, "(none)" where absent.
    decoders = utils.get_ffmpeg_decoders()
    for codec in ("h264", "mjpeg", "png", "flac"):
        assert f"  {codec}: {', '.join(decoders[codec])}" in lines
        assert codec in decoders[codec]
    for codec in ("hevc", "vp9", "av1", "aac", "mp3", "opus"):
        assert any(line.startswith(f"  {codec}: ") for line in lines)
    build = feedline._feedline_ext._build_type
    debug = "yes" if build == "Debug" else "no"
    assert f"extension build: {build} (debug build: {debug})" in lines


def test_info_json_is_the_same_data(tmp_path):
    done = run_feedline(tmp_path, "info", "--json")
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert info["feedline"] == feedline.__version__
    assert info["libraries"] == utils.get_library_versions()
    assert list(info["libraries"])[:2] == ["feedline", "libavformat"]
    assert info["decoders"]["h264"] == utils.get_ffmpeg_decoders()["h264"]
    assert set(info["decoders"]) == {"h264", "hevc", "vp9", "av1", "aac", "mp3", "opus", "flac", "mjpeg", "png"}
    assert info["cpu_count"] == os.cpu_count()
    # The package installed by pip (scikit-build-core) is a Release build.
    assert info["build_type"] in {"Release", "Debug", "RelWithDebInfo", "MinSizeRel"}
    assert info["debug_build"] is (info["build_type"] == "Debug")


def test_without_a_command_it_prints_usage_and_fails(tmp_path):
    done = run_feedline(tmp_path)
    assert done.returncode == 2
    assert "usage: python -m feedline" in done.stderr
    assert "{info,demo,stats,prepare-jpegs}" in done.stderr


SUMMARY = re.compile(r"^throughput:\s+[\d,]+ images/s \(\d+ threads\)$", re.M)


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs the ffmpeg CLI")
def test_demo_loads_generated_jpegs_and_prints_the_summary(tmp_path):
    done = run_feedline(tmp_path, "demo", "--images", "50")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert re.search(r"^dataset:\s+50 500x375 JPEGs made by the ffmpeg CLI in ", out, re.M), out
    assert re.search(r"^images:\s+50 of 50 in [\d.]+ s$", out, re.M), out
    assert SUMMARY.search(out), out
    assert re.search(r"^CPU per image:\s+[\d.]+ ms$", out, re.M), out
    # The per-stage statistics table names the pipeline's stages.
    assert "read_file" in out and "decode_batch" in out
    # The temporary dataset is removed.
    dataset = re.search(r"^dataset:.* in (\S+)$", out, re.M).group(1)
    assert not os.path.exists(dataset)


def test_demo_without_ffmpeg_writes_pngs_and_keeps_data_when_asked(tmp_path):
    # A PATH without the ffmpeg CLI: the demo falls back to PNGs it writes.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    env = dict(os.environ, PATH=str(bindir))
    data = tmp_path / "data"
    done = run_feedline(tmp_path, "demo", "--images", "40", "--batch", "16", "--data", str(data), env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^dataset:\s+40 500x375 PNGs in ", done.stdout, re.M), done.stdout
    assert re.search(r"^images:\s+40 of 40 in ", done.stdout, re.M), done.stdout
    assert SUMMARY.search(done.stdout), done.stdout
    assert sorted(p.name for p in data.iterdir()) == [f"{i:06d}.png" for i in range(40)]


def test_demo_jpeg_without_ffmpeg_says_what_is_missing(tmp_path):
    (tmp_path / "bin").mkdir()
    env = dict(os.environ, PATH=str(tmp_path / "bin"))
    done = run_feedline(tmp_path, "demo", "--images", "4", "--format", "jpeg", env=env)
    assert done.returncode != 0
    assert "--format jpeg needs the ffmpeg CLI on PATH" in done.stderr


def _jpeg(array, **kw):
    import io

    from PIL import Image

    b = io.BytesIO()
    Image.fromarray(array).save(b, format="JPEG", **kw)
    return b.getvalue()


def test_prepare_jpegs_rewrites_a_tree_and_copies_what_it_cannot(tmp_path):
    pytest.importorskip("PIL.Image")
    skdata = pytest.importorskip("skimage.data")
    import numpy as np

    import feedline.io as fio

    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    photo = _jpeg(skdata.chelsea(), quality=90)
    (src / "a.jpg").write_bytes(photo)
    (src / "sub" / "b.JPEG").write_bytes(_jpeg(skdata.coffee(), quality=80, progressive=True))
    png = fio.encode_image(skdata.chelsea(), format="png")
    (src / "c.jpg").write_bytes(png)  # a PNG named .jpg
    (src / "d.jpg").write_bytes(photo[:100])  # cut inside its header
    (src / "notes.txt").write_text("not an image")
    done = run_feedline(tmp_path, "prepare-jpegs", "src", "dst", "--threads", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(
        r"^2 rewritten, 2 copied unchanged, 0 failed, of 4 JPEGs \([+-]\d+\.\d% bytes\)$", done.stdout, re.M
    )
    dst = tmp_path / "dst"
    for rel, source in (("a.jpg", photo), ("sub/b.JPEG", (src / "sub" / "b.JPEG").read_bytes())):
        out = (dst / rel).read_bytes()
        assert b"feedline-rst" in out and out == fio.prepare_jpeg(source)
        assert np.array_equal(fio.to_numpy(fio.decode_image(out)), fio.to_numpy(fio.decode_image(source)))
    assert (dst / "c.jpg").read_bytes() == png
    assert (dst / "d.jpg").read_bytes() == photo[:100]
    assert "c.jpg" in done.stderr and "d.jpg" in done.stderr
    assert not (dst / "notes.txt").exists()
    assert not list(dst.rglob("*.tmp"))
    # --strict: a file copied unchanged fails the run.
    strict = run_feedline(tmp_path, "prepare-jpegs", "src", "dst2", "--strict")
    assert strict.returncode == 1, strict.stdout + strict.stderr


def _shard(path, members):
    """Writes a tar shard (tarfile's default pax format) of `members`:
    (name, bytes) for a file, (name, None) for a directory, (name, "->target")
    for a symlink."""
    import io
    import tarfile

    with tarfile.open(path, "w") as tar:
        for i, (name, data) in enumerate(members):
            info = tarfile.TarInfo(name)
            info.mtime, info.mode, info.uname = 1_700_000_000 + i, 0o640, "loader"
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif isinstance(data, str):
                info.type, info.linkname = tarfile.SYMTYPE, data[2:]
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


def test_prepare_jpegs_rewrites_the_jpegs_of_tar_shards_and_keeps_the_rest(tmp_path):
    pytest.importorskip("PIL.Image")
    skdata = pytest.importorskip("skimage.data")
    import tarfile

    import numpy as np

    import feedline.io as fio

    photo = _jpeg(skdata.chelsea(), quality=90)
    png = fio.encode_image(skdata.chelsea(), format="png")
    long_name = "n" * 120 + ".jpg"  # a pax "path" record
    members = [
        ("000.jpg", photo),
        ("000.cls", b"281\n"),
        ("dir", None),
        ("dir/001.JPEG", _jpeg(skdata.coffee(), quality=80, progressive=True)),
        ("002.jpg", png),  # a PNG named .jpg: kept as it is
        ("link.jpg", "->000.jpg"),
        (long_name, _jpeg(skdata.astronaut(), quality=85)),
        ("caf\u00e9.jpg", photo),
    ]
    (tmp_path / "src" / "train").mkdir(parents=True)
    _shard(tmp_path / "src" / "train" / "shard-0.tar", members)
    (tmp_path / "src" / "a.jpg").write_bytes(photo)
    done = run_feedline(tmp_path, "prepare-jpegs", "src", "dst", "--threads", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^5 rewritten, 1 copied unchanged, 0 failed, of 6 JPEGs", done.stdout, re.M), done.stdout
    assert re.search(r"^1 shards written, 0 failed, of 1$", done.stdout, re.M), done.stdout
    assert "shard-0.tar:002.jpg" in done.stderr
    assert (tmp_path / "dst" / "a.jpg").read_bytes() == fio.prepare_jpeg(photo)
    # One shard as SRC, a file as DST: the same bytes.
    single = run_feedline(tmp_path, "prepare-jpegs", "src/train/shard-0.tar", "one.tar")
    assert single.returncode == 0, single.stdout + single.stderr
    out = (tmp_path / "dst" / "train" / "shard-0.tar").read_bytes()
    assert (tmp_path / "one.tar").read_bytes() == out
    assert not list((tmp_path / "dst").rglob("*.tmp"))

    # Every member in its place with its metadata; the JPEGs rewritten.
    with tarfile.open(tmp_path / "src" / "train" / "shard-0.tar") as a, tarfile.open(tmp_path / "one.tar") as b:
        before, after = a.getmembers(), b.getmembers()
        assert [m.name for m in after] == [name for name, _ in members]
        for m, n in zip(before, after):
            assert (n.type, n.mode, n.mtime, n.uname, n.linkname) == (m.type, m.mode, m.mtime, m.uname, m.linkname)
            if not m.isfile():
                continue
            old, new = a.extractfile(m).read(), b.extractfile(n).read()
            if m.name.lower().endswith((".jpg", ".jpeg")) and old != png:
                assert new == fio.prepare_jpeg(old) and b"feedline-rst" in new
            else:
                assert new == old
    # The loader reads the shard: the same pixels as from the source.
    rewritten = dict(fio.iter_tarfile(tmp_path / "one.tar"))
    for name, data in fio.iter_tarfile(tmp_path / "src" / "train" / "shard-0.tar"):
        if name.endswith((".jpg", ".JPEG")):
            assert np.array_equal(
                fio.to_numpy(fio.decode_image(rewritten[name])), fio.to_numpy(fio.decode_image(bytes(data)))
            ), name


class _Unseekable:
    """A write-only stream: zipfile then writes each member's CRC-32 and
    sizes in a data descriptor after its data, as streaming writers do."""

    def __init__(self):
        self.data = bytearray()

    def write(self, b):
        self.data += b
        return len(b)

    def flush(self):
        pass


def test_prepare_jpegs_rewrites_the_jpegs_of_zip_shards_and_keeps_the_rest(tmp_path):
    pytest.importorskip("PIL.Image")
    skdata = pytest.importorskip("skimage.data")
    import zipfile

    import numpy as np

    import feedline.io as fio
    from feedline._feedline_ext import io as _io

    photo = _jpeg(skdata.chelsea(), quality=90)
    coffee = _jpeg(skdata.coffee(), quality=80, progressive=True)
    png = fio.encode_image(skdata.chelsea(), format="png")
    (tmp_path / "src").mkdir()
    with zipfile.ZipFile(tmp_path / "src" / "shard-0.zip", "w") as z:
        z.comment = b"shard 0"
        z.writestr("000.jpg", photo)  # stored
        z.writestr("000.cls", b"281\n", compress_type=zipfile.ZIP_DEFLATED)
        z.writestr("dir/", b"")
        z.writestr("dir/001.JPEG", coffee, compress_type=zipfile.ZIP_DEFLATED)
        z.writestr("002.jpg", png)  # a PNG named .jpg: kept as it is
        z.writestr("caf\u00e9.jpg", photo)
        z.writestr("secret.jpg", photo)
    # Marked encrypted (zipfile cannot write that): kept as it is.
    data = bytearray((tmp_path / "src" / "shard-0.zip").read_bytes())
    secret = [e for e in _io.list_zip(bytes(data), "s") if e.name == b"secret.jpg"][0]
    local = secret.data_offset - 30 - len("secret.jpg")
    central = data.rindex(b"PK\x01\x02")
    data[local + 6] |= 1
    data[central + 8] |= 1
    (tmp_path / "src" / "shard-0.zip").write_bytes(bytes(data))
    stream = _Unseekable()
    with zipfile.ZipFile(stream, "w") as z:
        z.writestr("a.jpg", photo)
        z.writestr("a.txt", b"a cat", compress_type=zipfile.ZIP_DEFLATED)
        z.writestr("b.jpg", coffee, compress_type=zipfile.ZIP_DEFLATED)
    (tmp_path / "src" / "shard-1.zip").write_bytes(bytes(stream.data))
    # Zip64: a streamed member with zip64 sizes (its descriptor's 8 bytes
    # wide) and 65,536 members, so a zip64 end record.
    stream = _Unseekable()
    with zipfile.ZipFile(stream, "w") as z:
        with z.open("a.jpg", "w", force_zip64=True) as f:
            f.write(photo)
        for i in range(0xFFFF):
            z.writestr(f"{i:05}.cls", str(i % 1000).encode())
    (tmp_path / "src" / "shard-2.zip").write_bytes(bytes(stream.data))
    assert bytes(stream.data[-42:-38]) == b"PK\x06\x07"  # the zip64 locator

    done = run_feedline(tmp_path, "prepare-jpegs", "src", "dst", "--threads", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^6 rewritten, 2 copied unchanged, 0 failed, of 8 JPEGs", done.stdout, re.M), done.stdout
    assert re.search(r"^3 shards written, 0 failed, of 3$", done.stdout, re.M), done.stdout
    assert "shard-0.zip:002.jpg" in done.stderr and "shard-0.zip:secret.jpg: the member is encrypted" in done.stderr
    single = run_feedline(tmp_path, "prepare-jpegs", "src/shard-1.zip", "one.zip")
    assert single.returncode == 0, single.stdout + single.stderr
    assert (tmp_path / "one.zip").read_bytes() == (tmp_path / "dst" / "shard-1.zip").read_bytes()

    for shard in ("shard-0.zip", "shard-1.zip"):
        with zipfile.ZipFile(tmp_path / "src" / shard) as a, zipfile.ZipFile(tmp_path / "dst" / shard) as b:
            assert b.comment == a.comment
            before, after = a.infolist(), b.infolist()
            assert [m.filename for m in after] == [m.filename for m in before]
            for m, n in zip(before, after):
                assert (n.date_time, n.external_attr, n.extra) == (m.date_time, m.external_attr, m.extra)
                if m.filename == "secret.jpg":
                    assert (n.flag_bits, n.compress_size) == (m.flag_bits, m.compress_size)
                    continue
                old, new = a.read(m), b.read(n)  # CRC-32s checked
                if m.filename.lower().endswith((".jpg", ".jpeg")) and old != png:
                    assert new == fio.prepare_jpeg(old) and b"feedline-rst" in new
                    assert n.compress_type == zipfile.ZIP_STORED and not n.flag_bits & 8
                else:
                    assert new == old and n.compress_type == m.compress_type
    with zipfile.ZipFile(tmp_path / "src" / "shard-2.zip") as a, zipfile.ZipFile(tmp_path / "dst" / "shard-2.zip") as b:
        before, after = a.infolist(), b.infolist()
        assert [(m.filename, m.date_time, m.CRC) for m in after[1:]] == [
            (m.filename, m.date_time, m.CRC) for m in before[1:]
        ]
        assert b.read("a.jpg") == fio.prepare_jpeg(photo) and not after[0].flag_bits & 8
        assert [b.read(m) for m in after[-3:]] == [b"532", b"533", b"534"]  # CRC-32s checked
    # The loader reads the shard: the same pixels as from the source.
    before, after = fio.open_zip(tmp_path / "src" / "shard-1.zip"), fio.open_zip(tmp_path / "one.zip")
    for name in ("a.jpg", "b.jpg"):
        assert np.array_equal(
            fio.to_numpy(fio.decode_image(bytes(after[name]))), fio.to_numpy(fio.decode_image(bytes(before[name])))
        )


def test_prepare_jpegs_reports_a_damaged_shard_and_writes_nothing_of_it(tmp_path):
    pytest.importorskip("PIL.Image")
    skdata = pytest.importorskip("skimage.data")
    photo = _jpeg(skdata.chelsea())
    (tmp_path / "src").mkdir()
    _shard(tmp_path / "src" / "good.tar", [("a.jpg", photo)])
    _shard(tmp_path / "whole.tar", [("a.jpg", photo), ("b.jpg", photo)])
    # Cut inside the second member's data.
    (tmp_path / "src" / "cut.tar").write_bytes((tmp_path / "whole.tar").read_bytes()[: 512 * 3 + len(photo) + 100])
    done = run_feedline(tmp_path, "prepare-jpegs", "src", "dst")
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(r"^1 shards written, 1 failed, of 2$", done.stdout, re.M), done.stdout
    assert re.search(r"failed: .*cut\.tar.*(truncated|overruns)", done.stderr), done.stderr
    assert (tmp_path / "dst" / "good.tar").exists() and not (tmp_path / "dst" / "cut.tar").exists()
    assert not list((tmp_path / "dst").rglob("*.tmp"))
    # A shard that cannot be written (a folder where it must go): its JPEGs
    # count as failed, and nothing of it is left behind.
    (tmp_path / "dst2" / "good.tar").mkdir(parents=True)
    (tmp_path / "src" / "cut.tar").unlink()
    unwritable = run_feedline(tmp_path, "prepare-jpegs", "src", "dst2")
    assert unwritable.returncode == 1, unwritable.stdout + unwritable.stderr
    assert re.search(r"^0 rewritten, 0 copied unchanged, 1 failed, of 1 JPEGs$", unwritable.stdout, re.M), (
        unwritable.stdout
    )
    assert re.search(r"^0 shards written, 1 failed, of 1$", unwritable.stdout, re.M)
    assert "good.tar: cannot write" in unwritable.stderr
    assert not list((tmp_path / "dst2").rglob("*.tmp"))


def test_prepare_jpegs_leaves_nothing_of_a_shard_whose_write_fails_half_way(tmp_path):
    pytest.importorskip("PIL.Image")
    skdata = pytest.importorskip("skimage.data")
    import resource

    photo = _jpeg(skdata.chelsea())
    (tmp_path / "src").mkdir()
    _shard(tmp_path / "src" / "big.tar", [(f"{i}.jpg", photo) for i in range(4)])
    limit = (tmp_path / "src" / "big.tar").stat().st_size // 2

    def small_files():  # writes past `limit` fail with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    done = subprocess.run(
        [sys.executable, "-m", "feedline", "prepare-jpegs", "src", "dst", "--threads", "2"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=small_files,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(r"^0 shards written, 1 failed, of 1$", done.stdout, re.M), done.stdout
    assert re.search(r"big\.tar: cannot write .*big\.tar.*: write failed: File too large", done.stderr), done.stderr
    assert not list((tmp_path / "dst").rglob("*.tar*"))


class _Zeros(io.RawIOBase):
    """n zero bytes, read as a file."""

    def __init__(self, n):
        self.n = n

    def readable(self):
        return True

    def readinto(self, buf):
        k = min(len(buf), self.n)
        buf[:k] = bytes(k)
        self.n -= k
        return k


def test_prepare_jpegs_reads_a_shard_a_piece_at_a_time(tmp_path):
    """A shard much larger than what it rewrites is neither read whole nor
    held: peak memory stays far below its size (it was the shard and more)."""
    pytest.importorskip("PIL.Image")
    skdata = pytest.importorskip("skimage.data")
    import tarfile

    photo = _jpeg(skdata.chelsea())
    big = 256 << 20
    (tmp_path / "src").mkdir()
    with tarfile.open(tmp_path / "src" / "s.tar", "w") as tar:
        for name, size, data in (("a.jpg", len(photo), photo), ("big.bin", big, None), ("c.jpg", len(photo), photo)):
            info = tarfile.TarInfo(name)
            info.size = size
            tar.addfile(info, io.BytesIO(data) if data else io.BufferedReader(_Zeros(size)))
    code = (
        "import runpy, sys\n"
        "sys.argv = ['feedline', 'prepare-jpegs', 'src/s.tar', 'dst/s.tar', '--threads', '2']\n"
        "try:\n"
        "    runpy.run_module('feedline', run_name='__main__')\n"
        "except SystemExit as e:\n"
        "    print('exit', e.code)\n"
        # This process's own peak (ru_maxrss would count the parent's: Linux
        # keeps it across exec).
        "print('peak', open('/proc/self/status').read().split('VmHWM:')[1].split()[0])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "exit 0" in done.stdout, done.stdout + done.stderr
    assert re.search(r"^2 rewritten, 0 copied unchanged, 0 failed, of 2 JPEGs", done.stdout, re.M), done.stdout
    peak = int(re.search(r"^peak (\d+)$", done.stdout, re.M).group(1)) << 10
    assert peak < 192 << 20, f"peak RSS {peak >> 20} MiB for a {big >> 20} MiB shard"
    with tarfile.open(tmp_path / "dst" / "s.tar") as tar:
        members = tar.getmembers()
        assert [(m.name, m.size) for m in members][1] == ("big.bin", big)
        assert tar.extractfile(members[1]).read(1 << 20) == bytes(1 << 20)
        assert np.array_equal(feedline.io.load_image(tar.extractfile(members[2]).read()), feedline.io.load_image(photo))


def test_the_archive_rewriter_writes_what_replace_members_gives(tmp_path):
    import zipfile

    import numpy as np

    from feedline._feedline_ext import io as _io

    stream = _Unseekable()
    with zipfile.ZipFile(stream, "w") as z:
        for name in ("a.jpg", "b.txt", "c.jpg"):
            z.writestr(name, name.encode() * 100, compress_type=zipfile.ZIP_DEFLATED)
    data = bytes(stream.data)
    w = _io.rewrite_zip(data, "s.zip", str(tmp_path / "out.zip"))
    assert w.order() == [0, 1, 2]
    w.replace(0, b"A")
    with pytest.raises(ValueError, match="comes before the last one replaced|replaced twice"):
        w.replace(0, b"again")
    w.replace(2, b"C")
    w.finish()
    assert (tmp_path / "out.zip").read_bytes() == np.asarray(
        _io.replace_zip_members(data, "s.zip", [(2, b"C"), (0, b"A")])
    ).tobytes()
    with zipfile.ZipFile(tmp_path / "out.zip") as z:
        assert [z.read(n) for n in z.namelist()] == [b"A", b"b.txt" * 100, b"C"]
    # A damaged archive is refused before the file is made.
    with pytest.raises(feedline.FormatError):
        _io.rewrite_tar(b"\x01" * 700, "bad.tar", str(tmp_path / "bad.tar"))
    assert not (tmp_path / "bad.tar").exists()


def test_prepare_jpegs_counts_a_file_it_cannot_write(tmp_path):
    pytest.importorskip("PIL.Image")
    skdata = pytest.importorskip("skimage.data")
    (tmp_path / "src" / "sub").mkdir(parents=True)
    (tmp_path / "src" / "a.jpg").write_bytes(_jpeg(skdata.chelsea()))
    (tmp_path / "src" / "sub" / "b.jpg").write_bytes(_jpeg(skdata.coffee()))
    (tmp_path / "dst").mkdir()
    (tmp_path / "dst" / "sub").write_text("a file where a folder must go")
    done = run_feedline(tmp_path, "prepare-jpegs", "src", "dst")
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(r"^1 rewritten, 0 copied unchanged, 1 failed, of 2 JPEGs", done.stdout, re.M), done.stdout
    assert "b.jpg" in done.stderr
    missing = run_feedline(tmp_path, "prepare-jpegs", "nowhere", "dst")
    assert missing.returncode == 1 and "nowhere is not a folder, a .tar file or a .zip file" in missing.stderr
