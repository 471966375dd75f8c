"""Hostile media through feedline.io: playlists and scripts that name other
files, text FFmpeg would decode as video, a header claiming a huge image,
hostile window times, one Demuxer used from two threads, and clip requests
past the end of their video. The media are made with the ffmpeg CLI."""

from __future__ import annotations

import fcntl
import math
import os
import subprocess
import sys
import threading
from decimal import Decimal
from fractions import Fraction

import pytest

import feedline
import feedline.io as fio
from feedline.io import ops
from feedline.pipeline import PipelineBuilder

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="uses /dev/fd and F_SETPIPE_SZ")


def run(*args):
    subprocess.run(["ffmpeg", "-v", "error", "-y", *args], check=True)


def bmp_header(width, height):
    """A BMP header (no pixels) claiming width x height at 24 bits."""
    import struct

    size = width * height * 3
    return (
        b"BM"
        + struct.pack("<IHHI", 54 + size, 0, 0, 54)
        + struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, size, 2835, 2835, 0, 0)
        + bytes(64)
    )


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile")
    run("-f", "lavfi", "-i", "testsrc=size=64x48:rate=25:duration=2", "-c:v", "libx264", "-pix_fmt", "yuv420p",
        str(d / "clip.mp4"))  # fmt: skip
    run("-i", str(d / "clip.mp4"), "-c", "copy", "-f", "mpegts", str(d / "segment.ts"))
    run("-f", "lavfi", "-i", "testsrc=size=16x16:rate=1:duration=1", str(d / "small.bmp"))
    (d / "playlist.m3u8").write_text(
        "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:0\n"
        "#EXTINF:2.0,\nsegment.ts\n#EXT-X-ENDLIST\n"
    )
    (d / "list.ffconcat").write_text("ffconcat version 1.0\nfile segment.ts\n")
    (d / "notes.txt").write_text("".join(f"line {i} of a plain text file\n" for i in range(60)))
    (d / "big.bmp").write_bytes(bmp_header(16000, 16000))
    return d


def test_hls_playlist_is_refused_unless_named(files):
    playlist = str(files / "playlist.m3u8")
    for load in (fio.load_video, fio.load_image_ffmpeg, fio.Demuxer, fio.demux_video):
        with pytest.raises(feedline.UnsupportedFormat, match=f"{playlist}: the hls format"):
            load(playlist)
    with pytest.raises(feedline.UnsupportedFormat, match="hls"):
        fio.load_image(playlist)
    # Named by the caller, or allowed as a class, it is read, segment and all.
    assert fio.load_video(playlist, demux_config=fio.demux_config(format="hls")).shape[0] == 50
    allowed = fio.demux_config(allow_unsafe_formats=True)
    assert fio.load_video(playlist, demux_config=allowed).shape[0] == 50
    # Demuxer adds the probe to the caller's config: the permission survives.
    assert fio.demux_video(playlist, demux_config=allowed).num_packets == 50
    with fio.Demuxer(playlist, demux_config=allowed) as d:
        assert d.demux_video().num_packets == 50


def test_demuxer_config_copy_keeps_every_field():
    from feedline._feedline_ext import io as native
    from feedline.io import _av

    fields = {k for k in dir(native.DemuxConfig) if not k.startswith("_")}
    assert fields == set(_av._DEMUX_FIELDS)


def test_concat_script_is_refused_from_path_and_bytes(files):
    script = files / "list.ffconcat"
    with pytest.raises(feedline.UnsupportedFormat, match=f"{script}: the concat format"):
        fio.load_video(script)
    with pytest.raises(feedline.UnsupportedFormat, match="script.txt: the concat format"):
        fio.load_video(script.read_bytes(), name="script.txt")
    with pytest.raises(feedline.UnsupportedFormat, match="the concat format"):
        fio.Demuxer(script.read_bytes())
    assert fio.load_video(script, demux_config=fio.demux_config(format="concat")).shape[0] == 50


def test_plain_text_is_not_an_image_or_a_video(files):
    text = str(files / "notes.txt")
    for load in (fio.load_image, fio.load_video, fio.load_image_ffmpeg, fio.Demuxer):
        with pytest.raises(feedline.UnsupportedFormat, match=f"{text}: the tty format"):
            load(text)
    with pytest.raises(feedline.DecodeError, match="notes"):
        fio.load_video((files / "notes.txt").read_bytes(), name="notes")


@pytest.mark.parametrize("options", [{"resize_shorter": 32}, {"crop": 8}, {"width": 32, "height": 32}])
def test_a_non_image_with_resize_options_is_a_typed_error_naming_it(files, options):
    text = str(files / "notes.txt")
    with pytest.raises(feedline.UnsupportedFormat, match=text):
        fio.load_image(text, **options)


def test_other_protocols_are_refused(files):
    for url in ("http://127.0.0.1:9/clip.mp4", "pipe:0", f"concat:{files / 'segment.ts'}"):
        with pytest.raises(feedline.UnsupportedFormat, match="protocol is not read by default"):
            fio.Demuxer(url)


def test_a_path_with_a_nul_is_refused_not_cut(files):
    with pytest.raises(ValueError):
        fio.Demuxer(str(files / "clip.mp4") + "\0.txt")


def test_huge_image_header_is_refused_before_allocating(files):
    # In a fresh process, so that its peak memory is this load's alone. The
    # peak is VmHWM, this process's own: ru_maxrss also keeps the peak of
    # the memory it replaced at exec (pytest's, a copy of which it was).
    code = (
        "import sys, feedline, feedline.io as fio\n"
        "for load in (fio.load_image, fio.load_image_ffmpeg, lambda p: fio.load_image_ffmpeg(open(p, 'rb').read())):\n"
        "    try:\n"
        "        load(sys.argv[1])\n"
        "    except feedline.DecodeError:\n"
        "        pass\n"
        "    else:\n"
        "        raise SystemExit('decoded')\n"
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]\n"
        "print(int(hwm.split()[1]) // 1024)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(files / "big.bmp")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) < 400  # MiB; 16000 x 16000 x 3 would be 732


def test_max_pixels_applies_to_the_ffmpeg_image_path(files):
    small = str(files / "small.bmp")
    assert fio.load_image(small).shape == (16, 16, 3)
    with pytest.raises(feedline.DecodeError, match=f"{small}: a frame of 16 x 16 pixels exceeds the limit of 100"):
        fio.load_image(small, max_pixels=100)
    with pytest.raises(feedline.DecodeError, match="exceeds the limit of 100"):
        fio.load_image(small, width=8, height=8, max_pixels=100)
    with pytest.raises(ValueError, match="max_pixels"):
        fio.load_image(small, max_pixels=0)


HOSTILE = [
    ((1e300, 2), "1e\\+300"),
    ((-1, 1), "starts before 0"),
    ((float("nan"), 1), "'nan'"),
    ((float("inf"), None), "'inf'"),
    ((0, float("nan")), "'nan'"),
    ((0, float("-inf")), "'-inf'"),
    ((2**80, None), str(2**80)),
    ((10**400, None), "below 2\\^31"),
    (("1/0", 1), "'1/0'"),
    ((0, "1/0"), "'1/0'"),
    ((2, 1), "ends before it starts"),
    ((Decimal("NaN"), 1), "'NaN'"),
    ((Decimal("1e999999999"), None), "1E\\+999999999"),
    ((Fraction(10**40, 3), None), "below 2\\^31"),
    (("x", 1), "'x'"),
]


@pytest.mark.parametrize(("timestamp", "named"), HOSTILE)
def test_hostile_window_times_are_value_errors_naming_the_value(files, timestamp, named):
    clip = str(files / "clip.mp4")
    for call in (
        lambda: fio.load_video(clip, timestamp=timestamp),
        lambda: fio.demux_video(clip, timestamp=timestamp),
        lambda: fio.Demuxer(clip).demux_video(timestamp),
    ):
        with pytest.raises(ValueError, match=named):
            call()


def test_tiny_times_round_to_zero(files):
    clip = str(files / "clip.mp4")
    assert fio.load_video(clip, timestamp=(1e-300, 1)).shape[0] == 25
    assert math.isclose(fio.demux_video(clip, timestamp=(0, "1e-99999")).timestamp[1], 0)


def test_demuxer_used_from_two_threads_raises_instead_of_crashing():
    """Thread A blocks inside demux_video() reading a pipe; the other
    thread's calls raise. A's demux is in progress once our write into the
    one-page pipe returns, since only A reads it."""
    r, w = os.pipe()
    try:
        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 4096)
        frame = bytes([7]) * 256  # one 16x16 gray frame
        os.write(w, frame)
        cfg = fio.demux_config(
            format="rawvideo", format_options={"video_size": "16x16", "pixel_format": "gray"}, find_stream_info=False
        )
        d = fio.Demuxer(f"/dev/fd/{r}", demux_config=cfg, name="pipe")
    finally:
        os.close(r)
    got, errors = [], []

    def demux():
        try:
            got.append(d.demux_video())
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    a = threading.Thread(target=demux)
    a.start()
    try:
        more = bytes([9]) * (256 * 255)
        view = memoryview(more)
        while view:
            view = view[os.write(w, view) :]
        with pytest.raises(feedline.Error, match="pipe: the Demuxer is in use by another thread"):
            d.video_codec  # noqa: B018
        with pytest.raises(feedline.Error, match="in use by another thread"):
            d.demux_video()
    finally:
        os.close(w)
        a.join()
    assert errors == []
    assert len(got[0]) == 256
    assert d.video_codec.width == 16  # free again


def test_a_clip_past_the_end_is_a_counted_failure_and_the_rest_stack(files):
    clip = str(files / "clip.mp4")
    requests = [(clip, 0, 1), (clip, 1, 2), (clip, 1.5, 2.5), (clip, "1/2", "3/2")]
    p = (
        PipelineBuilder()
        .add_source(requests)
        .pipe(ops.load_video_clips())
        .aggregate(4)
        .pipe(ops.stack())
        .add_sink(2)
        .build(num_threads=1)
    )
    with p.auto_stop():
        batches = list(p)
    assert [b.shape for b in batches] == [(3, 25, 48, 64, 3)]
    assert p.stats().stages[1].failures == 1
    one = PipelineBuilder().add_source([requests[2]]).pipe(ops.load_video_clips()).add_sink(1)
    one = one.build(num_threads=1, max_failures=0)
    with one.auto_stop(), pytest.raises(feedline.pipeline.PipelineFailure) as info:
        list(one)
    cause = info.value.exceptions[0].__cause__
    assert isinstance(cause, feedline.DecodeError)
    assert f"{clip}: the window [1.500000, 2.500000) s extends past the end" in str(cause)
    # The one-call loader keeps SPDL's behaviour: the shorter clip.
    assert fio.load_video(clip, timestamp=(1.5, 2.5)).shape[0] == 12
