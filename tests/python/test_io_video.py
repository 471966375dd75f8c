"""feedline.io's FFmpeg video API (SPDL's ``spdl.io`` names): load_video
against the ffmpeg CLI's own decode for each codec, windows (SPDL's half-open
cases), Demuxer and streaming demux, Packets and Frames, decode_packets in
the native format, streaming Decoder, sample_decode_video, bad input and the
native op. Filters, FilterGraph, batches and images are in
test_io_av_filters.py.

Every clip is made with the ffmpeg CLI by conftest.py's ``media`` fixture
(320x240 or 321x241, at most 3 seconds); every pixel comparison is
byte-exact against ``ffmpeg -i X -f rawvideo -pix_fmt rgb24 -`` (the ``rgb``
and ``ffmpeg`` fixtures).
"""

import sys
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

import feedline
import feedline.io as fio
from feedline.io import ops
from feedline.pipeline import PipelineBuilder, PipelineFailure

W, H = 320, 240  # the clips of conftest.MEDIA

# name -> (codec name, pix_fmt, width, height, frames) as the Demuxer reports them.
CODECS = {
    "h264_444.mp4": ("h264", "yuv444p", W, H, 50),
    "h264_420.mp4": ("h264", "yuv420p", W, H, 50),
    "hevc.mp4": ("hevc", "yuv420p", W, H, 50),
    "vp9.webm": ("vp9", "yuv420p", W, H, 50),
    "mpeg2.mkv": ("mpeg2video", "yuv420p", W, H, 50),
    "mpeg2.mpg": ("mpeg2video", "yuv420p", W, H, 50),
    "h264.ts": ("h264", "yuv420p", W, H, 50),
    "mjpeg.avi": ("mjpeg", "yuvj444p", W, H, 50),
    "odd.mp4": ("h264", "yuv444p", 321, 241, 25),
    "odd.webm": ("vp9", "yuv420p", 321, 241, 25),
    "odd_mjpeg.mkv": ("mjpeg", "yuvj444p", 321, 241, 25),
    "vfr.mkv": ("h264", "yuv420p", W, H, 35),
    "av.mp4": ("h264", "yuv420p", W, H, 50),
}


def arr(buf):
    return np.asarray(buf)


def frame_index(ts, fps=25):
    return [round(t * fps) for t in ts]


# --- load_video against the CLI ------------------------------------------------------


@pytest.mark.parametrize("name", list(CODECS))
def test_load_video_equals_the_ffmpeg_cli(media, rgb, name):
    codec, pix_fmt, w, h, n = CODECS[name]
    c = fio.Demuxer(media / name).video_codec
    assert (c.name, c.pix_fmt, c.width, c.height) == (codec, pix_fmt, w, h)
    want = rgb(name)
    assert want.shape == (n, h, w, 3)
    got = arr(fio.load_video(media / name))
    assert got.dtype == np.uint8 and got.shape == (n, h, w, 3)
    np.testing.assert_array_equal(got, want)
    # The filter path (decode_packets + a format filter) gives the same pixels.
    via_filter = arr(fio.load_video(media / name, filter_desc="format=pix_fmts=rgb24"))
    np.testing.assert_array_equal(via_filter, want)
    # And so does the SPDL chain demux -> decode -> convert.
    frames = fio.decode_packets(fio.demux_video(media / name))
    assert len(frames) == n and frames.pix_fmt == "rgb24"
    np.testing.assert_array_equal(arr(fio.convert_frames(frames)), want)


def test_timestamps_are_the_nearest_doubles(media):
    # ten.mp4: 10 fps in time base 1/10240, pts 1024 * k. k / 10 is the
    # double nearest 1024k / 10240; multiplying by a rounded 1 / 10240 gives
    # 0.6000000000000001 for k = 6 (what SPDL's exact values are compared to).
    packets = fio.demux_video(media / "ten.mp4")
    assert packets.time_base == (1, 10240)
    want = [k / 10 for k in range(30)]
    assert packets.get_timestamps() == want
    assert fio.decode_packets(packets).get_timestamps() == want


def test_variable_frame_rate_keeps_every_frame_and_its_time(media, rgb):
    packets = fio.demux_video(media / "vfr.mkv")
    want_ts = [i / 10 for i in range(10)] + [1 + i / 25 for i in range(25)]
    assert packets.get_timestamps() == pytest.approx(want_ts, abs=1e-6)
    frames = fio.decode_packets(packets)
    assert frames.get_timestamps() == pytest.approx(want_ts, abs=1e-6)
    np.testing.assert_array_equal(arr(fio.convert_frames(frames)), rgb("vfr.mkv"))
    # A window across the change of rate: 0.9 (10 fps), then 1.0, 1.04, ... 1.16.
    got = arr(fio.load_video(media / "vfr.mkv", timestamp=(0.85, 1.2)))
    np.testing.assert_array_equal(got, rgb("vfr.mkv")[9:15])


def test_load_video_from_memory_equals_from_the_path(media, rgb):
    data = (media / "h264_444.mp4").read_bytes()
    want = rgb("h264_444.mp4")
    array = np.frombuffer(data, np.uint8).copy()
    for src in (data, bytearray(data), memoryview(data), array):
        np.testing.assert_array_equal(arr(fio.load_video(src)), want)
    np.testing.assert_array_equal(arr(fio.load_video(data, timestamp=(0.5, 1.0))), want[13:25])
    # The NumPy array is read in place: the Demuxer holds a reference to it
    # (no copy), and everything lets it go in the end.
    before = sys.getrefcount(array)
    d = fio.Demuxer(array)
    assert sys.getrefcount(array) == before + 1
    packets = d.demux_video()
    d._drop()
    del d
    np.testing.assert_array_equal(arr(fio.convert_frames(fio.decode_packets(packets))), want)
    del packets
    assert sys.getrefcount(array) == before


def test_name_names_in_memory_sources(media):
    data = (media / "h264_444.mp4").read_bytes()
    assert fio.demux_video(data, name="clip-7").src == "clip-7"
    default = fio.demux_video(data)
    assert default.src.startswith("<Bytes: 0x") and "Bytes: 0x" in repr(default)
    with pytest.raises(feedline.DecodeError, match="clip-42"):
        fio.load_video(b"not a video at all " * 30, name="clip-42")
    with pytest.raises(feedline.DecodeError, match="clip-43"):
        fio.load_video(data, timestamp=(5, 6), name="clip-43")
    with pytest.raises(feedline.DecodeError, match="clip-44"):
        fio.Demuxer(data, name="clip-44").demux_audio()


# --- windows -------------------------------------------------------------------------

WINDOW_CODECS = ["h264_444.mp4", "h264_420.mp4", "hevc.mp4", "vp9.webm", "mpeg2.mkv", "mjpeg.avi"]
# (start, end): from the first frame, mid-GOP, off frame boundaries, across the
# key frame at 1.0 s, and past the end of the 2 s clip.
WINDOWS = [(0, 1), (0.3, 1.3), (0.52, 0.6), (1.0, 2.0), (0.97, 1.03), (0.61, 0.99), (1.5, 10)]


def in_window(window, n, fps=25, offset=0.0):
    s, e = (Fraction(str(x)) for x in window)
    return [i for i in range(n) if s <= Fraction(offset) + Fraction(i, fps) < e]


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("name", WINDOW_CODECS)
def test_window_equals_the_cli_frames(media, rgb, name, window):
    want_idx = in_window(window, 50)
    want = rgb(name)[want_idx]
    packets = fio.demux_video(media / name, timestamp=window)
    assert len(packets) == len(want_idx)
    assert packets.get_timestamps() == pytest.approx([i / 25 for i in want_idx], abs=1e-6)
    assert packets.timestamp == (float(window[0]), float(window[1]))
    np.testing.assert_array_equal(arr(fio.load_video(media / name, timestamp=window)), want)
    np.testing.assert_array_equal(
        arr(fio.load_video(media / name, timestamp=window, filter_desc="format=pix_fmts=rgb24")), want
    )
    frames = fio.decode_packets(packets)
    assert frames_index_of(frames) == want_idx


def frames_index_of(frames, fps=25):
    return frame_index(frames.get_timestamps(), fps)


# The stream of an MPEG-TS or MPEG-PS file starts at a non-zero time (1.48 s
# and 0.54 s here); windows are in stream time, as SPDL's.
@pytest.mark.parametrize("window", [(0.0, 0.4), (0.3, 0.7), (0.6, 1.3), (1.0, 1.2)])
@pytest.mark.parametrize("name", ["h264.ts", "mpeg2.mpg"])
def test_window_in_mpeg_ts_and_ps_files_equals_the_cli_frames(media, rgb, name, window):
    first = min(t for t in fio.demux_video(media / name).get_timestamps() if t > 0)
    assert first > 0.4  # a real offset: these containers start late
    s, e = first + window[0], first + window[1]
    want_idx = [i for i in range(50) if s - 1e-6 <= first + i / 25 < e - 1e-6]
    assert want_idx
    got = arr(fio.load_video(media / name, timestamp=(s, e)))
    assert got.shape[0] == len(want_idx)
    np.testing.assert_array_equal(got, rgb(name)[want_idx])


# SPDL's test_demux_window: half-open windows on a 25 fps clip with a key
# frame every 25 frames; (start, end) -> the frames' times.
SPDL_WINDOWS = [
    ((0.00, 0.04), [0.00]),
    ((0.00, 0.08), [0.00, 0.04]),
    ((0.02, 0.04), []),
    ((0.01, 0.08), [0.04]),
    ((0.00, 0.041), [0.00, 0.04]),
    ((0.00, 0.00), []),
    ((0.04, 0.04), []),
    ((0.039, 0.04), []),
    ((0.04, 0.12), [0.04, 0.08]),
    ((0.041, 0.12), [0.08]),
    ((0.119, 0.121), [0.12]),
    ((0.12, 0.25), [0.12, 0.16, 0.20, 0.24]),
    ((0.50, 0.60), [0.52, 0.56]),
    ((0.96, 1.00), [0.96]),
    ((0.96, 1.04), [0.96, 1.00]),
    ((0.999, 1.001), [1.00]),
    ((1.00, 1.00), []),
    ((1.00, 1.04), [1.00]),
    ((1.92, 2.00), [1.92, 1.96]),
    ((1.95, 10.0), [1.96]),
]


@pytest.mark.parametrize(("window", "want"), SPDL_WINDOWS)
def test_spdl_half_open_windows(media, rgb, window, want):
    path = media / "h264_444.mp4"
    packets = fio.demux_video(path, timestamp=window)
    assert len(packets) == len(want)
    assert packets.get_timestamps() == pytest.approx(want, abs=1e-9)
    frames = fio.decode_packets(packets)
    assert len(frames) == len(want)
    assert frames.get_timestamps() == pytest.approx(want, abs=1e-9)
    if want:
        np.testing.assert_array_equal(
            arr(fio.load_video(path, timestamp=window)), rgb("h264_444.mp4")[frame_index(want)]
        )
    else:
        with pytest.raises(feedline.DecodeError, match="no frame in the window"):
            fio.load_video(path, timestamp=window)


def test_window_after_the_end_raises_decode_error(media):
    path = media / "h264_444.mp4"
    for window in [(2.0, 3.0), (5, 6)]:
        with pytest.raises(feedline.DecodeError, match="h264_444.mp4.*no frame in the window"):
            fio.load_video(path, timestamp=window)
        with pytest.raises(feedline.DecodeError, match="h264_444.mp4"):
            fio.load_video(path, timestamp=window, filter_desc="format=pix_fmts=rgb24")
        packets = fio.demux_video(path, timestamp=window)
        assert len(packets) == 0 and packets.get_timestamps() == []
        assert len(fio.decode_packets(packets)) == 0


@pytest.mark.parametrize(
    "window",
    [
        (Fraction(1, 2), Fraction(1)),
        ("0.5", "1.0"),
        (Decimal("0.5"), Decimal("1")),
        (0.5, 1.0),
        (0.5, 1),
        (Fraction(1, 2), "1"),
    ],
)
def test_window_value_types(media, rgb, window):
    path = media / "h264_444.mp4"
    np.testing.assert_array_equal(arr(fio.load_video(path, timestamp=window)), rgb("h264_444.mp4")[13:25])
    packets = fio.demux_video(path, timestamp=window)
    assert packets.timestamp == (0.5, 1.0)
    assert all(type(t) is float for t in packets.timestamp)


def test_window_open_ended_and_exact_fractions(media, rgb):
    path = media / "h264_444.mp4"
    np.testing.assert_array_equal(arr(fio.load_video(path, timestamp=(1.5, float("inf")))), rgb("h264_444.mp4")[38:])
    # Exact thirds (no float can hold them): frames 9 (0.36 s) to 16 (0.64 s) lie in [1/3, 2/3).
    got = arr(fio.load_video(path, timestamp=(Fraction(1, 3), Fraction(2, 3))))
    np.testing.assert_array_equal(got, rgb("h264_444.mp4")[9:17])


@pytest.mark.parametrize(
    ("window", "error"),
    [
        ((1.0, 0.5), ValueError),
        ((-1, 1), ValueError),
        ((float("nan"), 1), ValueError),
        (("abc", 1), ValueError),
        ((1,), TypeError),
        ((0, 1, 2), TypeError),
        (([0], 1), TypeError),
    ],
)
def test_bad_windows_are_refused(media, window, error):
    with pytest.raises(error):
        fio.load_video(media / "h264_444.mp4", timestamp=window)
    with pytest.raises(error):
        fio.demux_video(media / "h264_444.mp4", timestamp=window)


# --- Demuxer --------------------------------------------------------------------------


def test_demuxer_codec_properties(media):
    with fio.Demuxer(media / "av.mp4") as d:
        assert d.has_audio()
        assert (d.video_stream_index, d.audio_stream_index) == (0, 1)
        v = d.video_codec
        assert (v.name, v.width, v.height, v.pix_fmt) == ("h264", W, H, "yuv420p")
        assert v.frame_rate == (25, 1) and v.time_base == (1, 12800) and v.sample_aspect_ratio == (1, 1)
        assert 'codec="h264"' in repr(v) and "VideoCodec" in repr(v)
        a = d.audio_codec
        assert (a.name, a.sample_rate, a.num_channels, a.sample_fmt) == ("aac", 44100, 1, "fltp")
        assert a.time_base == (1, 44100) and a.channel_layout == "0x4"
        assert 'codec="aac"' in repr(a) and "AudioCodec" in repr(a)
        i = d.image_codec
        assert (i.name, i.width, i.height, i.pix_fmt) == ("h264", W, H, "yuv420p")
        assert d.duration == pytest.approx(2.0, abs=0.05)
    six = fio.Demuxer(media / "six.flac").audio_codec
    assert (six.name, six.num_channels, six.sample_rate, six.sample_fmt, six.channel_layout) == (
        "flac",
        6,
        48000,
        "s16",
        "0x3f",
    )
    assert fio.Demuxer(media / "stereo.wav").audio_codec.channel_layout == "2c"  # no mask in the file
    assert fio.Demuxer(media / "mjpeg.avi").video_codec.time_base == (1, 25)
    assert fio.Demuxer(media / "vp9.webm").video_codec.time_base == (1, 1000)


def test_stream_indices_follow_the_file(media):
    d = fio.Demuxer(media / "rev.mp4")
    assert (d.audio_stream_index, d.video_stream_index) == (0, 1)
    assert fio.demux_video(media / "rev.mp4").stream_index == 1
    assert fio.demux_audio(media / "rev.mp4").stream_index == 0
    chunk = next(d.streaming_demux([0, 1], num_packets=3))
    assert type(chunk[0]) is fio.AudioPackets and type(chunk[1]) is fio.VideoPackets


@pytest.mark.parametrize(
    ("name", "has"), [("stereo.wav", True), ("av.mp4", True), ("h264_444.mp4", False), ("img.png", False)]
)
def test_has_audio(media, name, has):
    assert fio.Demuxer(media / name).has_audio() is has


def test_demux_methods_and_module_functions(media, ffmpeg):
    path = media / "av.mp4"
    d = fio.Demuxer(path)
    v = d.demux_video()
    a = d.demux_audio()
    assert type(v) is fio.VideoPackets and type(a) is fio.AudioPackets
    assert len(v) == 50 and v.num_packets == 50 and v.stream_index == 0
    assert (v.width, v.height, v.pix_fmt, v.frame_rate) == (W, H, "yuv420p", (25, 1))
    assert v.codec.name == "h264" and v.time_base == (1, 12800)
    assert a.sample_rate == 44100 and a.num_channels == 1 and a.codec.name == "aac"
    image = fio.demux_image(path)
    assert type(image) is fio.ImagePackets and image.num_packets == 1
    assert (image.width, image.height, image.pix_fmt) == (W, H, "yuv420p")
    first = fio.decode_packets(image)
    assert type(first) is fio.ImageFrames
    np.testing.assert_array_equal(
        arr(fio.convert_frames(first)),
        np.frombuffer(ffmpeg.raw(path, extra=["-frames:v", "1"]), np.uint8).reshape(H, W, 3),
    )
    assert len(fio.demux_video(path, timestamp=(0.5, 1.0))) == 12
    assert len(fio.demux_audio(path, timestamp=(0.5, 1.0))) > 0


@pytest.mark.parametrize(
    ("name", "kind"), [("h264_444.mp4", "video"), ("av.mp4", "audio"), ("mpeg2.mpg", "video"), ("h264.ts", "video")]
)
def test_demuxing_twice_from_one_demuxer_gives_the_same_packets(media, name, kind):
    # A later call seeks back to the beginning ("or back to the beginning when
    # an earlier call read packets", av.h): the same packets, decoding alike.
    with fio.Demuxer(media / name) as d:
        demux = getattr(d, f"demux_{kind}")
        first = demux()
        if kind == "audio":
            d.demux_video()
        else:
            d.demux_video((1.0, 1.5))
        again = demux()
    # NaN marks packets without a time (MPEG-PS): compare them as equal.
    np.testing.assert_array_equal(again.get_timestamps(raw=True), first.get_timestamps(raw=True))
    a = arr(fio.convert_frames(fio.decode_packets(first)))
    b = arr(fio.convert_frames(fio.decode_packets(again)))
    assert a.shape == b.shape
    np.testing.assert_array_equal(b, a)


def test_missing_streams_raise_decode_error(media):
    d = fio.Demuxer(media / "h264_444.mp4")
    with pytest.raises(feedline.DecodeError, match="no audio stream"):
        d.demux_audio()
    with pytest.raises(feedline.DecodeError, match="no audio stream"):
        d.audio_codec
    with pytest.raises(feedline.DecodeError, match="no audio stream"):
        d.audio_stream_index
    with pytest.raises(feedline.DecodeError, match="stereo.flac.*no video stream"):
        fio.load_video(media / "stereo.flac")


def test_demuxer_context_manager_frees_it(media):
    with fio.Demuxer(media / "h264_444.mp4") as d:
        packets = d.demux_video()
        assert "h264_444.mp4" in repr(d)
    assert repr(d) == "Demuxer(<closed>)"
    with pytest.raises(RuntimeError, match="closed"):
        d.demux_video()
    # The packets outlive the Demuxer.
    assert len(fio.decode_packets(packets)) == 50


def test_demuxer_argument_errors(media):
    # SPDL accepts and ignores unknown keywords; feedline too, but names them.
    with pytest.warns(UserWarning, match="foo"):
        fio.Demuxer(media / "h264_444.mp4", foo=1)
    with pytest.warns(UserWarning, match="foo"):
        assert arr(fio.load_video(media / "h264_444.mp4", foo=1)).shape[0] == 50
    with pytest.raises(ValueError, match="buffer_size"):
        fio.demux_config(buffer_size=0)
    for threads in (-1, True, 2.7):  # not 1 thread, not 2
        with pytest.raises(ValueError, match="threads"):
            fio.decode_config(threads=threads)
    with pytest.raises(ValueError, match="bytes-like"):
        fio.load_video(12)


def test_streaming_demux_by_count_covers_every_packet_once(media):
    path = media / "h264_444.mp4"
    want = fio.demux_video(path).get_timestamps(raw=True)
    d = fio.Demuxer(path)
    chunks = list(d.streaming_demux(num_packets=5))
    assert len(chunks) == 10
    assert all(type(c) is fio.VideoPackets and c.num_packets == 5 for c in chunks)
    assert all(c.codec is None and c.timestamp is None for c in chunks)
    assert sum((c.get_timestamps(raw=True) for c in chunks), []) == want
    # A new streaming_demux starts from the beginning again.
    again = list(d.streaming_demux(num_packets=5))
    assert sum((c.get_timestamps(raw=True) for c in again), []) == want
    # 7 does not divide 50: the remainder comes last.
    sizes = [c.num_packets for c in fio.Demuxer(path).streaming_demux(0, num_packets=7)]
    assert sizes == [7] * 7 + [1]
    # Streamed packets decode with the Demuxer's codec.
    with pytest.raises(RuntimeError, match="no codec"):
        chunks[0].width
    with pytest.raises(ValueError, match="no codec"):
        fio.decode_packets(chunks[0])


def test_streaming_demux_several_streams_gives_dicts(media):
    path = media / "av.mp4"
    totals = {0: [], 1: []}
    chunks = list(fio.Demuxer(path).streaming_demux([0, 1], num_packets=5))
    for i, chunk in enumerate(chunks):
        assert isinstance(chunk, dict) and set(chunk) <= {0, 1}
        if 0 in chunk:
            assert type(chunk[0]) is fio.VideoPackets
        if 1 in chunk:
            assert type(chunk[1]) is fio.AudioPackets
        if i < len(chunks) - 1:  # a chunk ends when one stream holds 5
            assert max(p.num_packets for p in chunk.values()) == 5
        for k, p in chunk.items():
            totals[k] += p.get_timestamps(raw=True)
    assert totals[0] == fio.demux_video(path).get_timestamps(raw=True)
    assert totals[1] == fio.demux_audio(path).get_timestamps(raw=True)
    # A one-element list also gives dicts; a set too.
    assert set(next(fio.Demuxer(path).streaming_demux([1], num_packets=5))) == {1}
    assert set(next(fio.Demuxer(path).streaming_demux({0}, num_packets=5))) == {0}


def test_streaming_demux_by_duration(media):
    path = media / "av.mp4"
    chunks = list(fio.Demuxer(path).streaming_demux([0, 1], duration=0.5))
    assert 3 <= len(chunks) <= 5
    totals = {0: [], 1: []}
    starts = []
    for chunk in chunks:
        ts = sum((p.get_timestamps(raw=True) for p in chunk.values()), [])
        assert max(ts) - min(ts) <= 0.5 + 0.2  # B-frames are stored before earlier frames
        starts.append(min(ts))
        for k, p in chunk.items():
            totals[k] += p.get_timestamps(raw=True)
    assert starts == sorted(starts)
    assert totals[0] == fio.demux_video(path).get_timestamps(raw=True)
    assert totals[1] == fio.demux_audio(path).get_timestamps(raw=True)
    video_only = list(fio.Demuxer(path).streaming_demux(0, duration=1.0))
    assert [type(c) for c in video_only] == [fio.VideoPackets] * len(video_only) and len(video_only) == 2
    assert sum(c.num_packets for c in video_only) == 50


def test_streaming_demux_argument_errors(media):
    d = fio.Demuxer(media / "av.mp4")
    with pytest.raises(ValueError, match="Either `duration` or `num_packets`"):
        next(d.streaming_demux())
    with pytest.raises(ValueError, match="Only one"):
        next(d.streaming_demux(duration=1, num_packets=2))
    with pytest.raises(IndexError, match=r"\[0, 2\)"):
        next(d.streaming_demux(5, num_packets=3))
    with pytest.raises(IndexError):
        next(d.streaming_demux([0, 5], num_packets=3))
    with pytest.raises(IndexError):
        next(d.streaming_demux(-1, num_packets=3))


# --- Packets and Frames ---------------------------------------------------------------


@pytest.mark.parametrize("kind", ["video", "audio", "image"])
def test_clone_shares_and_decodes_identically(media, kind):
    path = media / "av.mp4"
    packets = {
        "video": lambda: fio.demux_video(path, timestamp=(0.3, 0.9)),
        "audio": lambda: fio.demux_audio(path, timestamp=(0.3, 0.9)),
        "image": lambda: fio.demux_image(path),
    }[kind]()
    clones = [packets.clone() for _ in range(3)]
    assert all(repr(c) == repr(packets) for c in clones)
    assert all(c.get_timestamps(raw=True) == packets.get_timestamps(raw=True) for c in clones)
    want = arr(fio.convert_frames(fio.decode_packets(packets)))
    for c in clones:
        np.testing.assert_array_equal(arr(fio.convert_frames(fio.decode_packets(c))), want)
    if kind == "video":
        assert want.shape == (15, H, W, 3)


def test_consumed_packets_and_frames_raise_type_error(media):
    packets = fio.demux_video(media / "h264_444.mp4", timestamp=(0, 0.5))
    frames = fio.decode_packets(packets)
    assert packets.consumed and "consumed" in repr(packets)
    for use in (
        packets.clone,
        lambda: len(packets),
        packets.get_timestamps,
        lambda: packets.codec,
        lambda: fio.decode_packets(packets),
        lambda: fio.sample_decode_video(packets, [0]),
    ):
        with pytest.raises(TypeError, match="consumed"):
            use()
    keep = frames.clone()
    fio.convert_frames(frames)
    assert frames.consumed
    for use in (
        frames.clone,
        lambda: len(frames),
        frames.get_timestamps,
        lambda: frames[0],
        lambda: fio.convert_frames(frames),
        lambda: fio.convert_frames([keep.clone(), frames]),
    ):
        with pytest.raises(TypeError, match="consumed"):
            use()
    assert len(keep) == 13  # the clone is independent


def test_frames_clone_converts_identically(media, rgb):
    frames = fio.decode_packets(fio.demux_video(media / "h264_444.mp4"), num_frames=6)
    clones = [frames.clone() for _ in range(5)]
    want = rgb("h264_444.mp4")[:6]
    np.testing.assert_array_equal(arr(fio.convert_frames(frames)), want)
    for c in clones:
        np.testing.assert_array_equal(arr(fio.convert_frames(c)), want)


def test_packets_len_timestamps_and_repr(media):
    path = media / "h264_444.mp4"
    whole = fio.demux_video(path)
    assert len(whole) == 50
    assert whole.get_timestamps() == pytest.approx([i / 25 for i in range(50)], abs=1e-9)
    raw = whole.get_timestamps(raw=True)
    assert sorted(raw) == whole.get_timestamps() and raw != sorted(raw)  # B-frames: stored out of order
    packets = fio.demux_video(path, timestamp=(0.5, 1.0))
    assert len(packets) == 12 and packets.num_packets == 30  # from the key frame at 0
    r = repr(packets)
    for part in [
        'VideoPackets<src="',
        "h264_444.mp4",
        "num_packets=12",
        "pts=[0.520, 0.960]",
        "timestamp=(0.500, 1.000)",
        'codec="h264"',
        'pix_fmt="yuv444p"',
        "frame_rate=25/1",
        "width=320",
        "height=240",
    ]:
        assert part in r, (part, r)
    audio = fio.demux_audio(media / "av.mp4", timestamp=(0.5, 1.0))
    r = repr(audio)
    assert r.startswith("AudioPackets<") and "sample_rate=44100" in r and "timestamp=(0.500, 1.000)" in r
    assert 'codec="aac"' in r


def test_video_frames_indexing(media, rgb):
    frames = fio.decode_packets(fio.demux_video(media / "h264_444.mp4", timestamp=(0.5, 1.0)))
    want = rgb("h264_444.mp4")[13:25]
    assert len(frames) == 12 and frames.num_frames == 12
    first, last = frames[0], frames[-1]
    assert type(first) is fio.ImageFrames and first.pts == pytest.approx(0.52) and last.pts == pytest.approx(0.96)
    np.testing.assert_array_equal(arr(fio.convert_frames(frames[3])), want[3])
    np.testing.assert_array_equal(arr(fio.convert_frames(frames[-2])), want[-2])
    every3 = frames[::3]
    assert type(every3) is fio.VideoFrames
    assert every3.get_timestamps() == pytest.approx([0.52, 0.64, 0.76, 0.88])
    np.testing.assert_array_equal(arr(fio.convert_frames(every3)), want[::3])
    np.testing.assert_array_equal(arr(fio.convert_frames(frames[1:8:2])), want[1:8:2])
    np.testing.assert_array_equal(arr(fio.convert_frames(frames[-3:])), want[-3:])
    np.testing.assert_array_equal(arr(fio.convert_frames(frames[[0, -1, 4]])), want[[0, -1, 4]])
    assert len(frames[[]]) == 0 and len(frames[5:2]) == 0
    assert [f.pts for f in frames] == pytest.approx([0.52 + 0.04 * i for i in range(12)])
    for bad in (12, -13, 100):
        with pytest.raises(IndexError):
            frames[bad]
    with pytest.raises(IndexError):
        frames[[0, 12]]
    with pytest.raises(IndexError):
        frames[[-13]]
    with pytest.raises(ValueError):
        frames[::0]
    with pytest.raises(ValueError):
        frames[::-1]
    with pytest.raises(TypeError):
        frames["0"]
    # Indexing makes references: the source stays usable.
    assert len(frames) == 12
    r = repr(frames)
    for part in [
        "VideoFrames<num_frames=12",
        'pixel_format="rgb24"',
        "num_planes=1",
        "width=320",
        "height=240",
        "timestamp=[0.520, 0.960]",
    ]:
        assert part in r, (part, r)


def test_frame_time_base_and_pts(media):
    for fd in ({}, {"filter_desc": None}):
        frames = fio.decode_packets(fio.demux_video(media / "h264_444.mp4"), num_frames=10, **fd)
        assert frames.time_base == (1, 12800)
        assert frames.get_pts() == [512 * i for i in range(10)]
        assert frames.get_timestamps() == pytest.approx([512 * i / 12800 for i in range(10)])
    image = fio.decode_packets(fio.demux_image(media / "img.png"))
    assert image.metadata == {} and image.pts == 0.0


def test_native_format_keeps_the_decoders_pixels(media, ffmpeg):
    p420 = media / "h264_420.mp4"
    frames = fio.decode_packets(fio.demux_video(p420), filter_desc=None)
    assert (frames.pix_fmt, frames.num_planes, frames.width, frames.height) == ("yuv420p", 3, W, H)
    got = arr(fio.convert_frames(frames))
    assert got.shape == (50, 1, H * 3 // 2, W) and got.dtype == np.uint8
    want = np.frombuffer(ffmpeg.raw(p420, "yuv420p"), np.uint8).reshape(50, 1, H * 3 // 2, W)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(arr(fio.load_video(p420, filter_desc=None)), want)
    p444 = media / "h264_444.mp4"
    frames = fio.decode_packets(fio.demux_video(p444), filter_desc=None, num_frames=7)
    assert len(frames) == 7 and frames.pix_fmt == "yuv444p"
    got = arr(fio.convert_frames(frames))
    assert got.shape == (7, 3, H, W)
    want = np.frombuffer(ffmpeg.raw(p444, "yuv444p"), np.uint8).reshape(50, 3, H, W)
    np.testing.assert_array_equal(got, want[:7])
    # MJPEG decodes to full-range yuvj444p, kept as is.
    mj = fio.decode_packets(fio.demux_video(media / "mjpeg.avi"), filter_desc=None, num_frames=2)
    assert mj.pix_fmt == "yuvj444p" and arr(fio.convert_frames(mj)).shape == (2, 3, H, W)
    # Odd-sized yuv420p cannot be packed into one array.
    odd = fio.decode_packets(fio.demux_video(media / "odd.webm"), filter_desc=None)
    with pytest.raises(ValueError, match="odd size"):
        fio.convert_frames(odd)


def test_num_frames_limits_decoding(media, rgb):
    path = media / "h264_444.mp4"
    np.testing.assert_array_equal(arr(fio.load_video(path, num_frames=5)), rgb("h264_444.mp4")[:5])
    np.testing.assert_array_equal(
        arr(fio.load_video(path, timestamp=(0.5, 2), num_frames=4)), rgb("h264_444.mp4")[13:17]
    )
    frames = fio.decode_packets(fio.demux_video(path, timestamp=(1.0, 2.0)), num_frames=3)
    assert frames.get_timestamps() == pytest.approx([1.0, 1.04, 1.08])


def test_load_video_pixel_formats(media, rgb, ffmpeg):
    path = media / "h264_444.mp4"
    want = rgb("h264_444.mp4")
    np.testing.assert_array_equal(arr(fio.load_video(path, pix_fmt="bgr24")), want[..., ::-1])
    rgba = arr(fio.load_video(path, pix_fmt="rgba"))
    assert rgba.shape == (50, H, W, 4) and (rgba[..., 3] == 255).all()
    np.testing.assert_array_equal(rgba[..., :3], want)
    gray = arr(fio.load_video(path, pix_fmt="gray"))
    assert gray.shape == (50, H, W, 1)
    want_gray = np.frombuffer(ffmpeg.raw(path, "gray"), np.uint8).reshape(50, H, W, 1)
    np.testing.assert_array_equal(gray, want_gray)
    with pytest.raises(ValueError, match="pix_fmt"):
        fio.load_video(path, pix_fmt="yuv420p")


# --- streaming Decoder ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["h264_444.mp4", "hevc.mp4", "vp9.webm", "mpeg2.mkv"])
def test_streaming_decoder_equals_one_shot_decode(media, rgb, name):
    d = fio.Demuxer(media / name)
    decoder = fio.Decoder(d.video_codec)
    parts = []
    for packets in d.streaming_demux(d.video_stream_index, num_packets=7):
        for frames in decoder.streaming_decode_packets(packets):
            assert type(frames) is fio.VideoFrames and len(frames) > 0
            parts.append(frames)
    flushed = list(decoder.flush())
    if name != "vp9.webm":  # B-frames: the decoder holds frames until the end
        assert flushed and len(flushed[0]) > 0
    parts += flushed
    ts = sum((f.get_timestamps() for f in parts), [])
    assert ts == pytest.approx([i / 25 for i in range(50)], abs=1e-6)
    got = np.concatenate([arr(fio.convert_frames(f)) for f in parts])
    np.testing.assert_array_equal(got, rgb(name))


def test_decoder_buffer_size_caps_chunks(media, rgb):
    d = fio.Demuxer(media / "h264_444.mp4")
    decoder = fio.Decoder(d.video_codec)
    decoder.set_buffer_size(10)
    sizes, parts = [], []
    for packets in d.streaming_demux(num_packets=25):
        for frames in decoder.streaming_decode_packets(packets):
            sizes.append(len(frames))
            parts.append(arr(fio.convert_frames(frames)))
    for frames in decoder.flush():
        sizes.append(len(frames))
        parts.append(arr(fio.convert_frames(frames)))
    assert max(sizes) == 10 and sum(sizes) == 50
    np.testing.assert_array_equal(np.concatenate(parts), rgb("h264_444.mp4"))
    with pytest.raises(ValueError):
        decoder.set_buffer_size(-1)


def test_decoder_without_filter_and_for_audio(media, ffmpeg):
    d = fio.Demuxer(media / "av.mp4")
    vdec = fio.Decoder(d.video_codec, filter_desc=None)
    adec = fio.Decoder(d.audio_codec)
    video, audio = [], []
    for chunk in d.streaming_demux([0, 1], duration=0.5):
        if 0 in chunk:
            video += list(vdec.streaming_decode_packets(chunk[0]))
        if 1 in chunk:
            audio += list(adec.streaming_decode_packets(chunk[1]))
    video += list(vdec.flush())
    audio += list(adec.flush())
    assert all(f.pix_fmt == "yuv420p" for f in video)
    yuv = np.concatenate([arr(fio.convert_frames(f)) for f in video])
    want = np.frombuffer(ffmpeg.raw(media / "av.mp4", "yuv420p"), np.uint8).reshape(50, 1, H * 3 // 2, W)
    np.testing.assert_array_equal(yuv, want)
    assert all(type(f) is fio.AudioFrames and f.sample_fmt == "fltp" for f in audio)
    samples = np.concatenate([arr(fio.convert_frames(f)) for f in audio], axis=1)
    np.testing.assert_array_equal(samples, ffmpeg.audio(media / "av.mp4", 1))


# --- sample_decode_video --------------------------------------------------------------


@pytest.mark.parametrize("name", ["h264_444.mp4", "h264_420.mp4", "hevc.mp4", "vp9.webm", "mpeg2.mkv", "mjpeg.avi"])
def test_sample_decode_equals_the_full_decode(media, rgb, name):
    indices = [0, 1, 12, 24, 25, 26, 37, 48, 49]
    frames = fio.sample_decode_video(fio.demux_video(media / name), indices)
    assert len(frames) == len(indices)
    assert all(type(f) is fio.ImageFrames and f.pix_fmt == "rgb24" for f in frames)
    assert [f.pts for f in frames] == pytest.approx([i / 25 for i in indices], abs=1e-6)
    np.testing.assert_array_equal(np.stack([arr(fio.convert_frames(f)) for f in frames]), rgb(name)[indices])
    batch = fio.sample_decode_video(fio.demux_video(media / name), indices)
    np.testing.assert_array_equal(arr(fio.convert_frames(batch)), rgb(name)[indices])


def test_sample_decode_validation(media):
    path = media / "h264_444.mp4"
    cases = [
        ([], ValueError),
        ([50], IndexError),
        ([-1], IndexError),
        ([0, 50], IndexError),
        ([3, 2], ValueError),
        ([2, 2], ValueError),
        ([1, 5, 5], ValueError),
    ]
    for indices, error in cases:
        packets = fio.demux_video(path)
        with pytest.raises(error):
            fio.sample_decode_video(packets, indices)


def test_sample_decode_with_a_window_is_relative_to_it(media, rgb):
    path = media / "h264_444.mp4"
    packets = fio.demux_video(path, timestamp=(0.5, 1.5))
    assert len(packets) == 25
    frames = fio.sample_decode_video(packets, [0, 1, 11, 12, 20, 24])
    assert [f.pts for f in frames] == pytest.approx([0.52, 0.56, 0.96, 1.0, 1.32, 1.48])
    np.testing.assert_array_equal(
        np.stack([arr(fio.convert_frames(f)) for f in frames]), rgb("h264_444.mp4")[[13, 14, 24, 25, 33, 37]]
    )
    with pytest.raises(IndexError):
        fio.sample_decode_video(fio.demux_video(path, timestamp=(0.5, 1.5)), [25])


def test_sample_decode_with_a_window_and_a_filter(media, ffmpeg):
    # SPDL's case: 10 fps, window (0.55, 2.05), scaled; every other frame.
    packets = fio.demux_video(media / "ten.mp4", timestamp=(0.55, 2.05))
    assert len(packets) == 15
    desc = fio.get_video_filter_desc(scale_width=64, scale_height=48)
    frames = fio.sample_decode_video(packets, list(range(0, 15, 2)), filter_desc=desc)
    assert [f.pts for f in frames] == pytest.approx([0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0])
    assert all((f.width, f.height, f.pix_fmt) == (64, 48, "rgb24") for f in frames)
    want = np.frombuffer(
        ffmpeg.raw(media / "ten.mp4", extra=["-vf", "scale=w=64:h=48:flags=bicubic"]), np.uint8
    ).reshape(-1, 48, 64, 3)
    np.testing.assert_array_equal(arr(fio.convert_frames(frames)), want[6:21:2])
    native = fio.sample_decode_video(fio.demux_video(media / "ten.mp4"), [3], filter_desc=None)
    assert native[0].pix_fmt == "yuv420p"


def test_packet_timestamps_in_an_mpeg_ps_file(media):
    # MPEG-PS stores no pts on some packets (ffprobe: N/A): their times are
    # known only after decoding. get_timestamps() lists the known ones
    # (never a made-up 0.0); raw=True marks the others NaN.
    packets = fio.demux_video(media / "mpeg2.mpg")
    frames = fio.decode_packets(packets.clone())
    assert len(packets) == len(frames) == 50
    assert frames.get_timestamps()[0] == pytest.approx(0.54)
    known = packets.get_timestamps()
    raw = np.array(packets.get_timestamps(raw=True))
    assert 0 < len(known) < 50 and np.isnan(raw).sum() == 50 - len(known)
    decoded = np.array(frames.get_timestamps())
    assert all(np.abs(decoded - t).min() < 1e-6 for t in known)
    assert min(known) > 0.5


def test_sample_decode_in_an_mpeg_ps_file(media, rgb):
    # Index i is the i-th frame of the 50, whether or not its packet has a pts.
    packets = fio.demux_video(media / "mpeg2.mpg")
    assert len(packets) == 50
    picked = fio.sample_decode_video(packets, [0, 30])
    assert [f.pts for f in picked] == pytest.approx([0.54, 0.54 + 30 / 25])
    np.testing.assert_array_equal(np.stack([arr(fio.convert_frames(f)) for f in picked]), rgb("mpeg2.mpg")[[0, 30]])
    last = fio.sample_decode_video(fio.demux_video(media / "mpeg2.mpg"), [49])
    np.testing.assert_array_equal(arr(fio.convert_frames(last[0])), rgb("mpeg2.mpg")[49])


# --- bad input --------------------------------------------------------------------------


def test_not_media_and_empty_input(media):
    with pytest.raises(feedline.DecodeError, match="not a media file"):
        fio.load_video(media / "garbage.mp4")
    with pytest.raises(feedline.DecodeError, match="garbage.mp4"):
        fio.Demuxer(media / "garbage.mp4")
    with pytest.raises(feedline.DecodeError, match="empty"):
        fio.load_video(b"")
    with pytest.raises(feedline.DecodeError, match="empty"):
        fio.Demuxer(b"")


def test_truncated_file_gives_fewer_true_frames_or_a_decode_error(media, rgb):
    data = (media / "faststart.mp4").read_bytes()
    half = data[: len(data) // 2]
    want = rgb("h264_420.mp4")
    try:
        frames = fio.decode_packets(fio.demux_video(half, name="half.mp4"))
    except feedline.DecodeError as e:
        assert "half.mp4" in str(e)
        return
    idx = frames_index_of(frames)
    assert 0 < len(idx) < 50 and idx == sorted(set(idx))
    np.testing.assert_array_equal(arr(fio.convert_frames(frames)), want[idx])
    for fd in ({}, {"filter_desc": "format=pix_fmts=rgb24"}):
        got = arr(fio.load_video(half, name="half.mp4", **fd))
        np.testing.assert_array_equal(got, want[idx])
    native = arr(fio.load_video(half, filter_desc=None))
    assert native.shape == (len(idx), 1, H * 3 // 2, W)


@pytest.mark.parametrize("fd", [{}, {"filter_desc": None}, {"filter_desc": "format=pix_fmts=rgb24"}])
def test_bad_options_raise_value_error_naming_them(media, fd):
    path = media / "h264_444.mp4"
    with pytest.raises(ValueError, match="nope"):
        fio.load_video(path, demux_config=fio.demux_config(format="nope"), **fd)
    with pytest.raises(ValueError, match="bogus_opt"):
        fio.load_video(path, demux_config=fio.demux_config(format_options={"bogus_opt": "1"}), **fd)
    with pytest.raises(ValueError, match="bogus_dec"):
        fio.load_video(path, decode_config=fio.decode_config(decoder_options={"bogus_dec": "1"}), **fd)
    with pytest.raises(ValueError, match="no_such_decoder"):
        fio.load_video(path, decode_config=fio.decode_config(decoder="no_such_decoder"), **fd)


def test_good_options_are_taken(media, rgb):
    path = media / "h264_444.mp4"
    want = rgb("h264_444.mp4")
    np.testing.assert_array_equal(arr(fio.load_video(path, demux_config=fio.demux_config(format="mp4"))), want)
    np.testing.assert_array_equal(arr(fio.load_video(path, decode_config=fio.decode_config(decoder="h264"))), want)
    np.testing.assert_array_equal(arr(fio.load_video(path, decode_config=fio.decode_config(threads=0))), want)
    data = path.read_bytes()
    np.testing.assert_array_equal(arr(fio.load_video(data, demux_config=fio.demux_config(buffer_size=1024))), want)
    # A decoder for another codec opens but decodes nothing.
    with pytest.raises(feedline.DecodeError):
        fio.load_video(path, decode_config=fio.decode_config(decoder="hevc"))


def test_missing_file_is_an_io_error(media):
    missing = media / "missing.mp4"
    for call in (
        lambda: fio.load_video(missing),
        lambda: fio.Demuxer(missing),
        lambda: fio.demux_video(str(missing)),
        lambda: fio.load_video(missing, filter_desc=None),
    ):
        with pytest.raises(feedline.IoError, match="missing.mp4"):
            call()
    assert issubclass(feedline.IoError, RuntimeError)


# --- the native op ------------------------------------------------------------------------


def test_native_pipeline_loads_windows(media, rgb):
    names = ["h264_444.mp4", "h264_420.mp4", "vp9.webm", "h264_444.mp4"]
    paths = [str(media / n) for n in names] + [str(media / "garbage.mp4"), str(media / "missing.mp4")]
    p = (
        PipelineBuilder()
        .add_source(paths)
        .pipe(ops.read_file())
        .pipe(ops.load_video(timestamp=(0, 1)), concurrency=2)
        .add_sink(2)
        .build(num_threads=2)
    )
    with p.auto_stop():
        got = [np.asarray(b) for b in p]
    assert len(got) == 4 and all(g.shape == (25, H, W, 3) for g in got)
    wants = [rgb(n)[:25] for n in names]
    for g in got:  # concurrency 2 may reorder
        match = [i for i, w in enumerate(wants) if np.array_equal(g, w)]
        assert match, "an output equals no input's window"
        wants.pop(match[0])
    s = p.stats()
    assert s.stages[1].failures == 1  # the missing file
    assert s.stages[2].failures == 1  # the garbage
    q = PipelineBuilder().add_source([str(media / "garbage.mp4")]).pipe(ops.read_file()).pipe(ops.load_video())
    q = q.add_sink(1).build(num_threads=1, max_failures=0)
    with q.auto_stop(), pytest.raises(PipelineFailure) as info:
        list(q)
    cause = info.value.exceptions[0].__cause__
    assert type(cause) is feedline.DecodeError and "garbage.mp4" in str(cause)


def test_native_op_past_the_end_of_the_clip_fails(media):
    p = PipelineBuilder().add_source([str(media / "h264_444.mp4")]).pipe(ops.read_file())
    p = p.pipe(ops.load_video(timestamp=(3, 4))).add_sink(1).build(num_threads=1, max_failures=0)
    with p.auto_stop(), pytest.raises(PipelineFailure) as info:
        list(p)
    assert type(info.value.exceptions[0].__cause__) is feedline.DecodeError


def test_native_video_pipeline_decodes_while_python_holds_the_gil(media):
    # One Python item, a TAR of n clips, enters the pipeline; native stages
    # split it and decode the clips. The test then holds the GIL (no switch
    # interval, no call that releases it: stats() keeps the GIL) while it polls
    # until the decode stage has finished every clip: possible only if the
    # native ops never need the GIL.
    import io
    import sys
    import tarfile
    import time

    from feedline.pipeline import PipelineBuilder

    n = 24
    clip = (media / "h264_444.mp4").read_bytes()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for i in range(n):
            info = tarfile.TarInfo(f"clip{i}.mp4")
            info.size = len(clip)
            tar.addfile(info, io.BytesIO(clip))
    p = (
        PipelineBuilder()
        .add_source([buf.getvalue()])
        .pipe(fio.ops.tar_members())
        .pipe(fio.ops.load_video(), concurrency=2)
        .add_sink(n + 2)
        .build(num_threads=2)
    )

    def stage(stats, name):
        return next(s for s in stats.stages if name in s.name)

    deadline = time.monotonic() + 120
    with p.auto_stop():
        while stage(p.stats(), "load_video").items_in < 1:
            assert time.monotonic() < deadline
        old = sys.getswitchinterval()
        sys.setswitchinterval(1000.0)
        try:
            before = stage(p.stats(), "load_video").items_out
            while stage(p.stats(), "load_video").items_out < n:
                assert time.monotonic() < deadline, "decoding stopped while Python held the GIL"
        finally:
            sys.setswitchinterval(old)
        assert before < n  # there was decoding left to do during the hold
        out = [arr(b) for b in p]
    assert len(out) == n and all(o.shape == (50, H, W, 3) for o in out)


def test_buffer_cache_reuses_freed_large_buffers(media):
    path = media / "h264_444.mp4"
    fio.set_buffer_cache_limit(1 << 30)
    try:
        first = fio.load_video(path)  # 50 x 240 x 320 x 3: 11.5 MB
        held = arr(first).copy()
        del first
        cached = fio.buffer_cache_size()
        assert cached >= held.nbytes
        again = fio.load_video(path)  # takes the cached block
        assert fio.buffer_cache_size() < cached
        np.testing.assert_array_equal(arr(again), held)
        del again
        fio.set_buffer_cache_limit(0)
        assert fio.buffer_cache_size() == 0
        with pytest.raises(ValueError):
            fio.set_buffer_cache_limit(-1)
    finally:
        fio.set_buffer_cache_limit(1 << 30)


def test_native_clip_pipeline_loads_each_requests_window(media, rgb):
    from feedline._feedline_ext import io as native

    path = str(media / "h264_444.mp4")
    want = rgb("h264_444.mp4")
    requests = [
        (path, 0, 1),
        ((media / "h264_444.mp4").read_bytes(), Fraction(1, 2), "1"),
        (path, None),
        (path, (Decimal("1.5"), float("inf"))),
        (path, native.Window(0.5, 1.0)),
    ]
    p = PipelineBuilder().add_source(requests).pipe(ops.load_video_clips()).add_sink(2).build(num_threads=1)
    with p.auto_stop():
        got = [np.asarray(b) for b in p]
    expected = [want[:25], want[13:25], want, want[38:], want[13:25]]
    assert len(got) == len(expected)
    for g, w in zip(got, expected):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize(
    ("request_", "error"),
    [
        ("not a tuple", ValueError),
        (("x.mp4", 1.0, 0.5), ValueError),
        (("x.mp4", -1, 1), ValueError),
        (("x.mp4", [0], 1), ValueError),
        (("x.mp4", "abc", 1), ValueError),
        # Hostile shapes give a typed error, never a bad cast.
        (("x.mp4", [0, 1]), ValueError),
        (("x.mp4", (0,)), ValueError),
        (("x.mp4", (0, 1, 2)), ValueError),
        (("x.mp4", object(), 1), ValueError),
        (("x.mp4", 0, True), ValueError),
        ((b"", None, None, None), ValueError),
    ],
)
def test_native_clip_requests_are_checked(request_, error):
    p = PipelineBuilder().add_source([request_]).pipe(ops.load_video_clips()).add_sink(1)
    p = p.build(num_threads=1, max_failures=0)
    with p.auto_stop(), pytest.raises(PipelineFailure) as info:
        list(p)
    assert isinstance(info.value.exceptions[0].__cause__, error)


def test_window_is_a_native_class(media):
    from feedline._feedline_ext import io as native

    w = native.Window(Fraction(1, 3), "2/3")
    assert w.start == pytest.approx(1 / 3) and w.end == pytest.approx(2 / 3)
    assert native.Window(1, None).end == float("inf")
    with pytest.raises(ValueError, match=r"ends before it starts: \(1, 0.5\)"):
        native.Window(1, 0.5)
    packets = fio.demux_video(media / "h264_444.mp4", timestamp=(Fraction(1, 3), Fraction(2, 3)))
    assert packets.timestamp == pytest.approx((1 / 3, 2 / 3))


def test_all_frames_is_none_and_limits_are_positive(media):
    packets = fio.demux_video(media / "h264_444.mp4")
    assert len(fio.decode_packets(packets.clone(), num_frames=-1)) == 50  # the public default: all
    assert len(fio.decode_packets(packets.clone(), num_frames=4)) == 4
    from feedline._feedline_ext import io as native

    with pytest.raises(ValueError, match="> 0"):
        native.decode_packets(packets.clone(), None, native.DecodeConfig(), 0)
    assert len(native.decode_packets(packets, None, native.DecodeConfig(), None)) == 50
    assert fio.load_video(media / "h264_444.mp4", num_frames=3).shape[0] == 3


# --- decode and scale without a filter graph ------------------------------------


@pytest.mark.parametrize("name", ["h264_420.mp4", "odd.mp4", "mjpeg.avi", "vp9.webm"])
@pytest.mark.parametrize(
    "scale",
    [
        {"scale_width": 224, "scale_height": 224},  # fit and pad (SPDL's default)
        {"scale_width": 300, "scale_height": 150},  # 200 wide in the middle: 8 past a block of 16
        {"scale_width": 64, "scale_height": 48, "scale_mode": None, "scale_algo": "bilinear"},
        {"scale_width": 97, "scale_height": 131, "scale_mode": None, "pix_fmt": "bgr24"},
        {"scale_width": 640, "scale_height": 480, "scale_algo": "lanczos", "pix_fmt": "rgba"},
    ],
    ids=["pad-224", "pillarbox-200", "stretch-bilinear", "stretch-bgr", "upscale-rgba"],
)
def test_scale_and_format_chains_skip_the_graph_with_the_same_pixels(media, name, scale):
    # get_video_filter_desc's scale (+ pad) + format chain is done by one
    # swscale call per frame into the output; a chain with a `null` filter
    # in it takes the filter graph. Both must give the same bytes.
    fd = fio.get_video_filter_desc(**scale)
    parts = fd.split(",")
    graph = ",".join([*parts[:-1], "null", parts[-1]])
    fast = fio.to_numpy(fio.load_video(media / name, filter_desc=fd))
    slow = fio.to_numpy(fio.load_video(media / name, filter_desc=graph))
    assert fast.shape == slow.shape
    assert fast.shape[1:3] == (scale["scale_height"], scale["scale_width"])
    np.testing.assert_array_equal(fast, slow)
