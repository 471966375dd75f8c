"""feedline.io's FFmpeg filters (SPDL's ``spdl.io`` names): the filter
description helpers and their exact strings, filtered decodes against the
ffmpeg CLI running the same chain, FilterGraph, convert_frames batches,
images through FFmpeg, and io.utils.

Media are made with the ffmpeg CLI by conftest.py's ``media`` fixture
(320x240, at most 3 seconds); pixel and sample comparisons are byte-exact
against the CLI's raw output (the ``ffmpeg`` fixture).
"""

import numpy as np
import pytest

import feedline
import feedline.io as fio
from feedline.io import utils

W, H = 320, 240  # the clips of conftest.MEDIA


@pytest.fixture(scope="module")
def clip_rgb(rgb):
    return rgb("h264_444.mp4")


def arr(buf):
    return np.asarray(buf)


# --- filter descriptions ----------------------------------------------------------------


def test_video_filter_desc_spdl_canonical_example():
    got = fio.get_video_filter_desc(
        frame_rate=(30, 1),
        timestamp=(1.5, 4.0),
        scale_width=256,
        scale_height=256,
        crop_width=224,
        crop_height=224,
        num_frames=16,
    )
    assert got == (
        "fps=30/1,trim=start=1.5:end=4.0,"
        "scale=w=256:h=256:flags=bicubic:force_original_aspect_ratio=decrease,"
        "pad=w=256:h=256:x=-1:y=-1:color=black,crop=w=224:h=224,"
        "tpad=stop=-1:stop_mode=clone,trim=end_frame=16,format=pix_fmts=rgb24"
    )


@pytest.mark.parametrize(
    ("kwargs", "want"),
    [
        ({}, "format=pix_fmts=rgb24"),
        ({"pix_fmt": None}, None),
        ({"pix_fmt": "gray"}, "format=pix_fmts=gray"),
        ({"frame_rate": (5, 1), "pix_fmt": None}, "fps=5/1"),
        ({"scale_width": 64, "scale_mode": None}, "scale=w=64:h=0:flags=bicubic,format=pix_fmts=rgb24"),
        (
            {"scale_height": 32, "scale_algo": "bilinear", "scale_mode": None, "pix_fmt": None},
            "scale=w=0:h=32:flags=bilinear",
        ),
        (
            {"scale_width": 64, "scale_height": 32, "scale_mode": "crop"},
            "scale=w=64:h=32:flags=bicubic:force_original_aspect_ratio=increase,crop=w=64:h=32,format=pix_fmts=rgb24",
        ),
        (
            {"scale_width": 64, "scale_height": 64, "pad_mode": "white", "pix_fmt": None},
            "scale=w=64:h=64:flags=bicubic:force_original_aspect_ratio=decrease,pad=w=64:h=64:x=-1:y=-1:color=white",
        ),
        ({"crop_width": 100, "pix_fmt": None}, "crop=w=100:h=0"),
        (
            {"num_frames": 5, "pad_mode": "black", "pix_fmt": None},
            "tpad=stop=-1:stop_mode=add:color=black,trim=end_frame=5",
        ),
        ({"filter_desc": "hflip", "pix_fmt": "rgba"}, "hflip,format=pix_fmts=rgba"),
        ({"timestamp": (0, float("inf")), "pix_fmt": None}, "trim=start=0"),
        ({"timestamp": (float("-inf"), 2.5), "pix_fmt": None}, "trim=end=2.5"),
        ({"timestamp": (float("-inf"), float("inf")), "pix_fmt": None}, None),
    ],
)
def test_video_filter_desc_parts(kwargs, want):
    assert fio.get_video_filter_desc(**kwargs) == want


def test_video_filter_desc_rejects_an_unknown_scale_mode():
    with pytest.raises(ValueError, match="scale_mode"):
        fio.get_video_filter_desc(scale_width=64, scale_mode="stretch")


def test_audio_filter_desc_spdl_canonical_example():
    got = fio.get_audio_filter_desc(sample_rate=16000, num_channels=1, timestamp=(0.0, 10.0), filter_desc="volume=0.5")
    assert got == (
        "aformat=channel_layouts=1c,aresample=16000,atrim=start=0.0:end=10.0,volume=0.5,aformat=sample_fmts=fltp"
    )


@pytest.mark.parametrize(
    ("kwargs", "want"),
    [
        ({}, "aformat=sample_fmts=fltp"),
        ({"sample_fmt": None}, None),
        ({"sample_fmt": "s16"}, "aformat=sample_fmts=s16"),
        ({"num_frames": 8000, "sample_fmt": None}, "apad,atrim=end_sample=8000"),
        ({"timestamp": (0.5, float("inf")), "sample_fmt": None}, "atrim=start=0.5"),
        ({"timestamp": (float("-inf"), float("inf")), "sample_fmt": None}, None),
        (
            {"num_channels": 2, "sample_rate": 8000},
            "aformat=channel_layouts=2c,aresample=8000,aformat=sample_fmts=fltp",
        ),
    ],
)
def test_audio_filter_desc_parts(kwargs, want):
    assert fio.get_audio_filter_desc(**kwargs) == want


def test_get_filter_desc_dispatches_on_the_packets_type(media):
    audio = fio.demux_audio(media / "av.mp4", timestamp=(0.25, 0.75))
    assert fio.get_filter_desc(audio) == "atrim=start=0.25:end=0.75,aformat=sample_fmts=fltp"
    assert fio.get_filter_desc(audio, num_frames=100, sample_rate=8000) == (
        "aresample=8000,atrim=start=0.25:end=0.75,apad,atrim=end_sample=100,aformat=sample_fmts=fltp"
    )
    # Video: no trim (the decoder applies the window itself).
    video = fio.demux_video(media / "av.mp4", timestamp=(0.25, 0.75))
    assert fio.get_filter_desc(video) == "format=pix_fmts=rgb24"
    assert fio.get_filter_desc(video, scale_width=32, scale_mode=None) == (
        "scale=w=32:h=0:flags=bicubic,format=pix_fmts=rgb24"
    )
    assert fio.get_filter_desc(fio.demux_image(media / "img.png")) == "format=pix_fmts=rgb24"
    for wrong in ("format=rgb24", None, fio.Demuxer(media / "av.mp4").video_codec):
        with pytest.raises(TypeError):
            fio.get_filter_desc(wrong)


def test_source_descriptions_for_filter_graphs(media):
    v = fio.Demuxer(media / "h264_444.mp4").video_codec
    assert fio.get_buffer_desc(v) == "buffer=video_size=320x240:pix_fmt=yuv444p:time_base=1/12800:pixel_aspect=1/1"
    assert fio.get_buffer_desc(v, label="in0", pix_fmt="rgb24") == (
        "buffer@in0=video_size=320x240:pix_fmt=rgb24:time_base=1/12800:pixel_aspect=1/1"
    )
    a = fio.Demuxer(media / "av.mp4").audio_codec
    assert fio.get_abuffer_desc(a) == "abuffer=time_base=1/44100:sample_rate=44100:sample_fmt=fltp:channel_layout=0x4"
    assert fio.get_abuffer_desc(a, label="x", sample_fmt="s16") == (
        "abuffer@x=time_base=1/44100:sample_rate=44100:sample_fmt=s16:channel_layout=0x4"
    )
    wav = fio.Demuxer(media / "stereo.wav").audio_codec
    assert fio.get_abuffer_desc(wav) == "abuffer=time_base=1/48000:sample_rate=48000:sample_fmt=s16:channel_layout=2c"


# --- filtered decodes against the CLI ---------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "shape"),
    [
        ({"scale_width": 64, "scale_height": 48}, (48, 64, 3)),
        ({"scale_width": 64, "scale_height": 64}, (64, 64, 3)),  # padded: 8 black rows above and below
        ({"scale_width": 64, "scale_height": 64, "scale_mode": "crop"}, (64, 64, 3)),
        ({"scale_width": 100, "scale_height": 30, "scale_mode": None}, (30, 100, 3)),
        ({"scale_width": 80, "scale_mode": None, "crop_width": 40, "crop_height": 40}, (40, 40, 3)),
        ({"scale_width": 64, "scale_height": 48, "pix_fmt": "gray"}, (48, 64, 1)),
        ({"scale_width": 64, "scale_height": 48, "pix_fmt": "rgba"}, (48, 64, 4)),
    ],
)
def test_load_video_with_a_filter_equals_the_cli_running_it(media, kwargs, shape, ffmpeg):
    desc = fio.get_video_filter_desc(**kwargs)
    got = arr(fio.load_video(media / "h264_444.mp4", filter_desc=desc))
    assert got.shape == (50, *shape) and got.dtype == np.uint8
    np.testing.assert_array_equal(
        got, ffmpeg.video(media / "h264_444.mp4", shape, vf=desc, pix_fmt=kwargs.get("pix_fmt", "rgb24"))
    )
    if kwargs == {"scale_width": 64, "scale_height": 64}:
        assert (got[:, :8] == 0).all() and (got[:, -8:] == 0).all() and got[:, 8:-8].max() > 0


def test_frames_that_change_size_get_a_new_graph_as_in_the_cli(tmp_path, ffmpeg):
    # Two raw H.264 streams of different sizes, one after the other: the
    # decoder's frames shrink from 640x480 to 160x120 mid-stream. crop is
    # configured for one input size; fed the smaller frames, the graph made
    # for the first ones read past them (garbage out, or a crash).
    parts = []
    for size in ("640x480", "160x120"):
        part = tmp_path / f"{size}.h264"
        ffmpeg("-f", "lavfi", "-i", f"testsrc=size={size}:rate=25", "-frames:v", 10, "-c:v", "libx264", part)
        parts.append(part.read_bytes())
    path = tmp_path / "shrinking.h264"
    path.write_bytes(b"".join(parts))
    desc = "crop=w=100:h=100:x=500:y=350,format=rgb24"
    got = arr(fio.load_video(path, filter_desc=desc))
    assert got.shape == (20, 100, 100, 3)
    np.testing.assert_array_equal(got, ffmpeg.video(path, (100, 100, 3), vf=desc))
    with pytest.raises(feedline.DecodeError, match="160x120.*does not take the new ones"):
        fio.load_video(path, filter_desc="crop=w=200:h=200:x=0:y=0,format=rgb24")


def test_window_and_filter_together(media, ffmpeg):
    desc = fio.get_video_filter_desc(scale_width=64, scale_height=48)
    got = arr(fio.load_video(media / "h264_444.mp4", timestamp=(0.5, 1.3), filter_desc=desc))
    want = ffmpeg.video(media / "h264_444.mp4", (48, 64, 3), vf=desc)
    np.testing.assert_array_equal(got, want[13:33])


@pytest.mark.parametrize(("num_frames", "pad_mode"), [(25, None), (100, None), (100, "black"), (100, "white")])
def test_num_frames_pads_or_cuts(media, num_frames, pad_mode, ffmpeg):
    desc = fio.get_video_filter_desc(scale_width=64, scale_height=48, num_frames=num_frames, pad_mode=pad_mode)
    got = arr(fio.load_video(media / "h264_444.mp4", filter_desc=desc))
    assert got.shape == (num_frames, 48, 64, 3)
    ref = ffmpeg.video(
        media / "h264_444.mp4", (48, 64, 3), vf=fio.get_video_filter_desc(scale_width=64, scale_height=48)
    )
    n = min(num_frames, 50)
    np.testing.assert_array_equal(got[:n], ref[:n])
    if num_frames > 50:
        padding = got[50:]
        if pad_mode is None:
            assert all(np.array_equal(f, ref[49]) for f in padding)  # the last frame, repeated
        else:
            assert (padding == (0 if pad_mode == "black" else 255)).all()


def test_fps_filter_halves_the_frames(media, ffmpeg):
    path = media / "ten.mp4"  # 3 s at 10 fps
    assert len(fio.demux_video(path)) == 30
    desc = fio.get_video_filter_desc(frame_rate=(5, 1))
    frames = fio.decode_packets(fio.demux_video(path), filter_desc=desc)
    assert len(frames) == 15
    assert frames.get_timestamps() == pytest.approx([0.2 * i for i in range(15)])
    np.testing.assert_array_equal(arr(fio.convert_frames(frames)), ffmpeg.video(path, (H, W, 3), vf=desc))
    np.testing.assert_array_equal(arr(fio.load_video(path, filter_desc=desc)), ffmpeg.video(path, (H, W, 3), vf=desc))


def test_image_filters(media, ffmpeg):
    desc = fio.get_video_filter_desc(scale_width=64, scale_height=48)
    got = arr(fio.load_image_ffmpeg(media / "img.bmp", filter_desc=desc))
    assert got.shape == (48, 64, 3)
    np.testing.assert_array_equal(got, ffmpeg.video(media / "img.bmp", (48, 64, 3), vf=desc)[0])
    np.testing.assert_array_equal(arr(fio.load_image(media / "img.bmp", width=64, height=48)), got)


def test_audio_filters_equal_the_cli(media, ffmpeg):
    path = media / "stereo.flac"
    desc = fio.get_audio_filter_desc(sample_rate=16000, num_channels=1)
    frames = fio.decode_packets(fio.demux_audio(path), filter_desc=desc)
    assert (frames.sample_rate, frames.num_channels, frames.sample_fmt) == (16000, 1, "fltp")
    got = arr(fio.convert_frames(frames))
    assert got.shape == (1, 16000)
    np.testing.assert_array_equal(got, ffmpeg.audio(path, 1, af=desc))
    # The default chain trims to the window.
    full = ffmpeg.audio(path, 2)
    window = arr(fio.convert_frames(fio.decode_packets(fio.demux_audio(path, timestamp=(0.25, 0.5)))))
    np.testing.assert_array_equal(window, full[:, 12000:24000])
    # num_frames cuts, or pads with silence.
    cut = arr(
        fio.convert_frames(
            fio.decode_packets(fio.demux_audio(path), filter_desc=fio.get_audio_filter_desc(num_frames=8000))
        )
    )
    np.testing.assert_array_equal(cut, full[:, :8000])
    padded = arr(
        fio.convert_frames(
            fio.decode_packets(fio.demux_audio(path), filter_desc=fio.get_audio_filter_desc(num_frames=60000))
        )
    )
    assert padded.shape == (2, 60000) and not padded[:, 48000:].any()
    np.testing.assert_array_equal(padded[:, :48000], full)


def test_audio_without_the_default_format_keeps_the_sample_format(media, ffmpeg):
    native = fio.decode_packets(fio.demux_audio(media / "stereo.flac"), filter_desc=None)
    assert native.sample_fmt == "s16"
    got = arr(fio.convert_frames(native))
    assert got.shape == (48000, 2) and got.dtype == np.int16  # packed: (N, C)
    np.testing.assert_array_equal(got.T.astype(np.float32) / 32768, ffmpeg.audio(media / "stereo.flac", 2))
    planar = arr(
        fio.convert_frames(
            fio.decode_packets(fio.demux_audio(media / "stereo.flac"), filter_desc="aformat=sample_fmts=s16p")
        )
    )
    assert planar.shape == (2, 48000) and planar.dtype == np.int16
    np.testing.assert_array_equal(planar, got.T)
    # SPDL's downmix case: a user filter skips the fltp conversion.
    down = arr(
        fio.convert_frames(
            fio.decode_packets(fio.demux_audio(media / "six.flac"), filter_desc="aformat=channel_layouts=2c")
        )
    )
    assert down.shape == (48000, 2) and down.dtype == np.int16


# --- FilterGraph -----------------------------------------------------------------------------


def native_frames(path, n=None):
    return fio.decode_packets(fio.demux_video(path), filter_desc=None, num_frames=n or -1)


def test_filter_graph_video_passthrough(media):
    codec = fio.Demuxer(media / "h264_444.mp4").video_codec
    g = fio.FilterGraph(f"{fio.get_buffer_desc(codec)},null,buffersink")
    assert g.inputs == ["Parsed_buffer_0"] and g.outputs == ["Parsed_buffersink_2"]
    assert g.get_frames() is None  # nothing yet
    frames = native_frames(media / "h264_444.mp4")
    want = arr(fio.convert_frames(frames.clone()))
    want_pts = frames.get_pts()
    g.add_frames(frames)
    with pytest.raises(TypeError, match="consumed"):
        len(frames)
    g.flush()
    out = g.get_frames()
    assert type(out) is fio.VideoFrames and out.pix_fmt == "yuv444p" and out.time_base == (1, 12800)
    assert out.get_pts() == want_pts
    np.testing.assert_array_equal(arr(fio.convert_frames(out)), want)
    assert g.get_frames() is None
    assert "Parsed_buffer_0" in g.dump() and "Parsed_null_1" in g.dump()


def test_filter_graph_audio_passthrough(media):
    d = fio.Demuxer(media / "stereo.flac")
    g = fio.FilterGraph(f"{fio.get_abuffer_desc(d.audio_codec)},anull,abuffersink")
    frames = fio.decode_packets(d.demux_audio(), filter_desc=None)
    want = arr(fio.convert_frames(frames.clone()))
    g.add_frames(frames)
    g.flush()
    out = g.get_frames()
    assert type(out) is fio.AudioFrames and out.num_frames == 48000 and out.sample_fmt == "s16"
    np.testing.assert_array_equal(arr(fio.convert_frames(out)), want)


def test_filter_graph_two_inputs_vstack(media, clip_rgb):
    codec = fio.Demuxer(media / "h264_444.mp4").video_codec
    desc = (
        f"{fio.get_buffer_desc(codec, label='in0')} [a];{fio.get_buffer_desc(codec, label='in1')} [b];"
        "[a][b] vstack,format=pix_fmts=rgb24,buffersink"
    )
    g = fio.FilterGraph(desc)
    assert g.inputs == ["buffer@in0", "buffer@in1"]
    frames = native_frames(media / "h264_444.mp4", 5)
    with pytest.raises(ValueError, match="buffer@in0"):  # several inputs: a key is needed
        g.add_frames(frames.clone())
    with pytest.raises(ValueError, match="nope"):
        g.add_frames(frames.clone(), key="nope")
    g.add_frames(frames.clone(), key="buffer@in0")
    g.add_frames(frames, key="buffer@in1")
    g.flush()
    got = arr(fio.convert_frames(g.get_frames()))
    assert got.shape == (5, 2 * H, W, 3)
    np.testing.assert_array_equal(got[:, :H], clip_rgb[:5])
    np.testing.assert_array_equal(got[:, H:], clip_rgb[:5])


def test_filter_graph_split_to_two_outputs(media, clip_rgb, ffmpeg):
    codec = fio.Demuxer(media / "h264_444.mp4").video_codec
    desc = (
        f"{fio.get_buffer_desc(codec)},split [a][b];"
        "[a] format=pix_fmts=rgb24,buffersink@out0;"
        "[b] scale=w=32:h=24,format=pix_fmts=gray,buffersink@out1"
    )
    g = fio.FilterGraph(desc)
    assert g.outputs == ["buffersink@out0", "buffersink@out1"]
    g.add_frames(native_frames(media / "h264_444.mp4", 5))
    g.flush()
    with pytest.raises(ValueError, match="buffersink@out0"):  # several outputs: a key is needed
        g.get_frames()
    with pytest.raises(ValueError, match="nope"):
        g.get_frames(key="nope")
    rgb = g.get_frames(key="buffersink@out0")
    gray = g.get_frames(key="buffersink@out1")
    np.testing.assert_array_equal(arr(fio.convert_frames(rgb)), clip_rgb[:5])
    assert (gray.width, gray.height, gray.pix_fmt, len(gray)) == (32, 24, "gray", 5)
    want = ffmpeg.video(media / "h264_444.mp4", (24, 32, 1), vf="scale=w=32:h=24", pix_fmt="gray")
    np.testing.assert_array_equal(arr(fio.convert_frames(gray)), want[:5])


def test_filter_graph_audio_to_video(media, ffmpeg):
    # SPDL's showwaves case, smaller.
    d = fio.Demuxer(media / "stereo.flac")
    chain = "showwaves=s=160x120:mode=line,format=pix_fmts=rgba"
    g = fio.FilterGraph(f"{fio.get_abuffer_desc(d.audio_codec)},{chain},buffersink")
    g.add_frames(fio.decode_packets(d.demux_audio(), filter_desc=None))
    g.flush()
    out = g.get_frames()
    assert type(out) is fio.VideoFrames and out.pix_fmt == "rgba"
    got = arr(fio.convert_frames(out))
    assert got.shape[1:] == (120, 160, 4) and got.shape[0] == 25
    np.testing.assert_array_equal(
        got, ffmpeg.video(media / "stereo.flac", (120, 160, 4), vf=chain, pix_fmt="rgba", flag="-filter_complex")
    )


@pytest.mark.parametrize(
    "desc",
    [
        "no_such_filter",
        "",
        "buffer=video_size=320x240:pix_fmt=yuv444p:time_base=1/12800:pixel_aspect=1/1,scale=w=abc,buffersink",
        "buffer=video_size=320x240:pix_fmt=yuv444p:time_base=1/12800:pixel_aspect=1/1,null",  # no sink
        "null",  # neither source nor sink
    ],
)
def test_filter_graph_bad_description_is_a_value_error(desc):
    with pytest.raises(ValueError):
        fio.FilterGraph(desc)


def test_filter_graph_refuses_a_frame_that_does_not_match(media):
    codec = fio.Demuxer(media / "h264_444.mp4").video_codec  # yuv444p 320x240
    g = fio.FilterGraph(f"{fio.get_buffer_desc(codec)},null,buffersink")
    with pytest.raises(ValueError, match=r"pix_fmt \(rgb24 != yuv444p\)"):
        g.add_frames(fio.decode_packets(fio.demux_video(media / "h264_444.mp4"), num_frames=2))
    with pytest.raises(ValueError, match="321x241|video_size"):
        g.add_frames(native_frames(media / "odd.mp4", 2))
    # A matching frame still goes through afterwards.
    g.add_frames(native_frames(media / "h264_444.mp4", 2))
    g.flush()
    assert len(g.get_frames()) == 2


# --- convert_frames -----------------------------------------------------------------------------


def test_convert_frames_batches_equal_shapes(media, clip_rgb):
    path = media / "h264_444.mp4"
    frames = [fio.decode_packets(fio.demux_video(path, timestamp=(0.5 * i, 0.5 * i + 0.4))) for i in range(3)]
    assert [len(f) for f in frames] == [10, 10, 10]
    batch = arr(fio.convert_frames(frames))
    assert batch.shape == (3, 10, H, W, 3)
    for i, first in enumerate([0, 13, 25]):  # frames in [0.5 i, 0.5 i + 0.4)
        np.testing.assert_array_equal(batch[i], clip_rgb[first : first + 10])
    assert all(f.consumed for f in frames)
    # Images batch too; a tuple works like a list.
    images = tuple(fio.decode_packets(fio.demux_image(media / n)) for n in ("img.png", "img.bmp"))
    both = arr(fio.convert_frames(images))
    assert both.shape == (2, H, W, 3)
    np.testing.assert_array_equal(both[0], both[1])


def test_convert_frames_audio_batch(media, ffmpeg):
    path = media / "stereo.flac"
    parts = [fio.decode_packets(fio.demux_audio(path, timestamp=(0.2 * i, 0.2 * i + 0.1))) for i in range(3)]
    assert [p.num_frames for p in parts] == [4800] * 3
    batch = arr(fio.convert_frames(parts))
    assert batch.shape == (3, 2, 4800) and batch.dtype == np.float32
    full = ffmpeg.audio(path, 2)
    for i in range(3):
        np.testing.assert_array_equal(batch[i], full[:, 9600 * i : 9600 * i + 4800])


def test_convert_frames_refuses_mismatched_batches(media):
    path = media / "h264_444.mp4"

    def video(window, **kw):
        return fio.decode_packets(fio.demux_video(path, timestamp=window), **kw)

    cases = [
        [video((0, 0.4)), video((0, 0.2))],  # frame counts differ
        [video((0, 0.2)), fio.decode_packets(fio.demux_video(media / "odd.mp4", timestamp=(0, 0.2)))],  # sizes
        [video((0, 0.2)), video((0, 0.2), filter_desc=None)],  # rgb24 and yuv444p
        [video((0, 0.2)), fio.decode_packets(fio.demux_audio(media / "stereo.flac"))],  # video and audio
        [
            fio.decode_packets(fio.demux_audio(media / "stereo.flac", timestamp=(0, 0.1))),
            fio.decode_packets(fio.demux_audio(media / "stereo.flac", timestamp=(0, 0.2))),
        ],  # sample counts
        [],
    ]
    for batch in cases:
        with pytest.raises(ValueError):
            fio.convert_frames(batch)
    with pytest.raises(ValueError, match="no frame"):
        fio.convert_frames(video((0.5, 0.5)))
    with pytest.raises(TypeError):
        fio.convert_frames(["not frames"])


# --- images through FFmpeg --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "codec"),
    [("img.bmp", "bmp"), ("img.tiff", "tiff"), ("lossy.webp", "webp"), ("lossless.webp", "webp"), ("img.png", "png")],
)
def test_image_through_ffmpeg_equals_the_cli(media, name, codec, ffmpeg):
    path = media / name
    assert fio.Demuxer(path).image_codec.name == codec
    want = ffmpeg.video(path, (H, W, 3))[0]
    got = arr(fio.load_image(path))  # not JPEG/PNG (except img.png): FFmpeg
    assert got.shape == (H, W, 3) and got.dtype == np.uint8
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(arr(fio.load_image_ffmpeg(path)), want)
    np.testing.assert_array_equal(arr(fio.load_image_ffmpeg(path.read_bytes())), want)
    frames = fio.decode_packets(fio.demux_image(path))
    assert type(frames) is fio.ImageFrames and frames.pix_fmt == "rgb24"
    np.testing.assert_array_equal(arr(fio.convert_frames(frames)), want)


@pytest.mark.parametrize("width", [17, 33, 449])
def test_yuv420p_of_a_width_past_a_whole_block_equals_the_cli(tmp_path, ffmpeg, width):
    # libswscale's x86 converters leave the pixels past the last whole
    # 16-pixel block of a row unwritten when the row's stride has no room for
    # the block: those columns must still be the decoded pixels, every call.
    src = f"testsrc=duration=0.3:size={width}x18:rate=10"
    image, video = tmp_path / "odd.webp", tmp_path / "odd.mkv"
    ffmpeg("-f", "lavfi", "-i", src, "-frames:v", 1, "-c:v", "libwebp", image)
    ffmpeg("-f", "lavfi", "-i", src, "-c:v", "ffv1", "-pix_fmt", "yuv420p", video)
    want_image = ffmpeg.video(image, (18, width, 3))[0]
    want_video = ffmpeg.video(video, (18, width, 3))
    assert len(want_video) == 3
    same_size = fio.get_video_filter_desc(scale_width=width, scale_height=18, pix_fmt="bgra")
    for _ in range(3):  # what the converter leaves is whatever the memory held
        np.testing.assert_array_equal(arr(fio.load_image(image)), want_image)
        np.testing.assert_array_equal(arr(fio.load_image(image, hflip=1)), want_image[:, ::-1])
        np.testing.assert_array_equal(arr(fio.load_video(video)), want_video)
        bgra = arr(fio.load_video(video, filter_desc=same_size))
        np.testing.assert_array_equal(bgra[..., 2::-1], want_video)
        assert (bgra[..., 3] == 255).all()


def test_png_through_ffmpeg_equals_the_fast_path(media):
    path = media / "img.png"
    fast = arr(fio.load_image(path))
    slow = arr(fio.load_image_ffmpeg(path))
    assert fast.shape == slow.shape == (H, W, 3)
    np.testing.assert_array_equal(slow, fast)
    # A decode_config sends it through FFmpeg too.
    np.testing.assert_array_equal(arr(fio.load_image(path, decode_config=fio.decode_config())), fast)


def test_image_errors(media):
    with pytest.raises(feedline.IoError, match="missing.bmp"):
        fio.load_image(media / "missing.bmp")
    with pytest.raises(feedline.DecodeError, match="pic-3"):
        fio.load_image_ffmpeg(b"BM not really a bitmap" * 10, name="pic-3")


# --- io.utils ------------------------------------------------------------------------------------


def test_ffmpeg_filters_and_versions():
    filters = utils.get_ffmpeg_filters()
    assert len(filters) > 100 and all(isinstance(f, str) for f in filters)
    assert {"scale", "aresample", "format", "tpad", "fps", "showwaves", "vstack"} <= set(filters)
    versions = utils.get_ffmpeg_versions()
    # SPDL reports libavutil, libavcodec, libavformat, libavfilter (and
    # libavdevice); feedline links the first four.
    assert {"libavutil", "libavcodec", "libavformat", "libavfilter"} <= set(versions)
    assert all(len(v) == 3 and all(isinstance(x, int) for x in v) for v in versions.values())
    assert versions["libavcodec"] >= (59, 0, 0)


def test_ffmpeg_log_level_round_trip():
    before = utils.get_ffmpeg_log_level()
    try:
        utils.set_ffmpeg_log_level("error")
        assert utils.get_ffmpeg_log_level() == 16
        utils.set_ffmpeg_log_level(24)
        assert utils.get_ffmpeg_log_level() == 24
    finally:
        utils.set_ffmpeg_log_level(before)
    assert utils.get_ffmpeg_log_level() == before


@pytest.mark.parametrize("subsampling", [0, 2])  # 4:4:4 and 4:2:0
def test_jpeg_through_ffmpeg_agrees_with_the_fast_path(subsampling):
    # Both decode the same DCT data; they differ only in chroma upsampling
    # (libjpeg-turbo's "fancy" upsampling against libswscale's), so 4:4:4
    # agrees to a few levels and 4:2:0 to about one level on average.
    import io

    import skimage.data
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(skimage.data.astronaut()).save(buf, "JPEG", quality=90, subsampling=subsampling)
    data = buf.getvalue()
    fast = arr(fio.decode_image(data)).astype(np.float64)
    slow = arr(fio.load_image_ffmpeg(data)).astype(np.float64)
    assert fast.shape == slow.shape == (512, 512, 3)
    diff = np.abs(fast - slow)
    psnr = 10 * np.log10(255**2 / np.mean(diff**2))
    if subsampling == 0:
        assert diff.mean() < 0.2 and diff.max() <= 4
    else:
        assert diff.mean() < 1.5 and psnr > 35
