"""feedline.io.load_audio: FFmpeg-decoded audio against the ffmpeg CLI's own
decode of the same files (made here with the CLI), windows, resampling,
bad input and the native op."""

import pathlib

import numpy as np
import pytest

import feedline
import feedline.io as fio
from feedline.io import ops
from feedline.pipeline import PipelineBuilder, PipelineFailure

# (file name, encoder arguments): codecs whose decoders are deterministic.
CODECS = [
    ("pcm.wav", ["-c:a", "pcm_s16le"]),
    ("lossless.flac", ["-c:a", "flac"]),
    ("lame.mp3", ["-c:a", "libmp3lame", "-b:a", "128k"]),
    ("native.m4a", ["-c:a", "aac", "-b:a", "128k"]),
    ("vorbis.ogg", ["-c:a", "libvorbis"]),
    ("opus.opus", ["-c:a", "libopus"]),
]


@pytest.mark.parametrize(("name", "encoder"), CODECS)
@pytest.mark.parametrize("channels", [1, 2, 6])
def test_matches_the_ffmpeg_cli(tmp_path, name, encoder, channels, ffmpeg):
    if name.endswith(".mp3") and channels > 2:
        pytest.skip("MP3 holds at most 2 channels")
    if name.endswith(".opus") and channels == 6:
        encoder = [*encoder, "-mapping_family", "1"]
    path = tmp_path / name
    ffmpeg.sine(path, channels, 48000 if name.endswith(".opus") else 16000, 1, encoder)
    got = np.asarray(fio.load_audio(path))
    want = ffmpeg.audio(path, channels)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    # The same from bytes in memory.
    np.testing.assert_array_equal(np.asarray(fio.load_audio(path.read_bytes())), want)


def test_window_and_resampling(tmp_path, ffmpeg):
    path = tmp_path / "a.flac"
    ffmpeg.sine(path, 2, 16000, 2, ["-c:a", "flac"])
    full = np.asarray(fio.load_audio(path))
    part = np.asarray(fio.load_audio(path, timestamp=(0.5, 1.25)))
    np.testing.assert_array_equal(part, full[:, 8000:20000])
    mono8k = np.asarray(fio.load_audio(path, sample_rate=8000, num_channels=1))
    assert mono8k.shape[0] == 1 and abs(mono8k.shape[1] - 16000) <= 64
    # A 440 Hz tone survives: its spectrum peaks at 440 Hz.
    spectrum = np.abs(np.fft.rfft(mono8k[0, :8000]))
    assert abs(np.argmax(spectrum) * 8000 / 8000 - 440) <= 2
    with pytest.raises(ValueError):
        fio.load_audio(path, timestamp=(1.0, 0.5))


def test_a_window_to_infinity_or_past_the_end(tmp_path, ffmpeg):
    # An infinite end ("to the end") or a start past every sample: the
    # sample counts were float-to-int casts of infinity (undefined, in
    # practice a negative count and a "dimensions must be >= 0" error).
    path = tmp_path / "a.flac"
    ffmpeg.sine(path, 2, 16000, 2, ["-c:a", "flac"])
    whole = np.asarray(fio.load_audio(path))
    np.testing.assert_array_equal(np.asarray(fio.load_audio(path, timestamp=(0, float("inf")))), whole)
    np.testing.assert_array_equal(np.asarray(fio.load_audio(path, timestamp=(0.5, float("inf")))), whole[:, 8000:])
    # Past the end: an error, as decode_packets and SPDL (it gave (2, 0)).
    with pytest.raises(feedline.DecodeError, match=r"a.flac: no audio in the window \[10.0, inf\) s"):
        fio.load_audio(path, timestamp=(10, float("inf")))
    with pytest.raises(ValueError, match="a time must be below 2"):
        fio.load_audio(path, timestamp=(1e300, 1e301))
    # Times as SPDL takes them: str, Decimal, Fraction.
    import decimal
    import fractions

    quarter = whole[:, 4000:8000]
    for start, end in (
        ("0.25", "0.5"),
        (decimal.Decimal("0.25"), 0.5),
        (fractions.Fraction(1, 4), fractions.Fraction(1, 2)),
    ):
        np.testing.assert_array_equal(np.asarray(fio.load_audio(path, timestamp=(start, end))), quarter)


def test_bad_input_raises_decode_error_naming_it(tmp_path, ffmpeg):
    with pytest.raises(feedline.DecodeError, match="empty"):
        fio.load_audio(b"")
    with pytest.raises(feedline.DecodeError, match="not a media file") as info:
        fio.load_audio(b"this is not audio at all" * 50)
    assert "bytes>" in str(info.value)
    video = tmp_path / "video.mp4"
    ffmpeg("-f", "lavfi", "-i", "testsrc=duration=0.2:size=64x64:rate=10", "-c:v", "mpeg4", str(video))
    with pytest.raises(feedline.DecodeError, match="no audio stream") as info:
        fio.load_audio(video)
    assert "video.mp4" in str(info.value)
    flac = tmp_path / "a.flac"
    ffmpeg.sine(flac, 1, 16000, 1, ["-c:a", "flac"])
    with pytest.raises(feedline.DecodeError):
        fio.load_audio(flac.read_bytes()[:40])


def test_native_op_decodes_audio_without_the_gil(tmp_path, ffmpeg):
    paths = []
    for i in range(4):
        p = tmp_path / f"{i}.flac"
        ffmpeg.sine(p, 1, 16000, 0.25, ["-c:a", "flac"])
        paths.append(str(p))
    paths.append(str(tmp_path / "missing.flac"))
    p = (
        PipelineBuilder()
        .add_source(paths)
        .pipe(ops.read_file())
        .pipe(ops.load_audio(sample_rate=8000), concurrency=2)
        .add_sink(4)
        .build(num_threads=2)
    )
    with p.auto_stop():
        got = [np.asarray(b) for b in p]
    assert len(got) == 4 and all(g.shape[0] == 1 for g in got)
    assert p.stats().stages[1].failures == 1
    q = PipelineBuilder().add_source([b"garbage" * 10]).pipe(ops.load_audio()).add_sink(1)
    q = q.build(num_threads=1, max_failures=0)
    with q.auto_stop(), pytest.raises(PipelineFailure) as info:
        list(q)
    assert type(info.value.exceptions[0].__cause__) is feedline.DecodeError


def test_ffmpeg_versions_and_log_level():
    from feedline.io import utils

    versions = utils.get_ffmpeg_versions()
    assert versions["libavcodec"][0] >= 59 and set(versions) >= {"libavformat", "libavutil", "libswresample"}
    utils.set_ffmpeg_log_level("error")
    utils.set_ffmpeg_log_level("quiet")
    with pytest.raises(ValueError):
        utils.set_ffmpeg_log_level("loud")


def test_a_stream_that_decodes_to_nothing_gives_an_empty_array():
    # Found by the fuzzer (null source in a zero-length copy); kept as a seed.
    seed = pathlib.Path(__file__).resolve().parents[2] / "fuzz/corpus/audio/regression-no-samples.mp4"
    out = fio.load_audio(seed)
    assert out.shape[1] == 0 and out.dtype == "float32"


def _joined(tmp_path, ffmpeg, name, parts, encoder):
    """One file of the streams `parts` (channels, rate) made one after the
    other and joined byte for byte (MP3 and ADTS frames carry their own
    headers, so the result is one stream whose layout or rate changes)."""
    data = b""
    for i, (channels, rate) in enumerate(parts):
        part = tmp_path / f"part{i}{pathlib.Path(name).suffix}"
        ffmpeg.sine(part, channels, rate, 1, encoder)
        data += part.read_bytes()
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_a_stream_whose_channels_or_rate_change_midway_matches_the_cli(tmp_path, ffmpeg):
    # Stereo, then mono: the resampler set up for two planes was once fed the
    # mono frames' one plane (a crash the fuzzer found). Each change now sets
    # it up again, as the CLI's auto-inserted resampler does: same samples.
    mp3 = ["-c:a", "libmp3lame", "-b:a", "64k", "-write_xing", "0", "-id3v2_version", "0"]
    path = _joined(tmp_path, ffmpeg, "stereo-then-mono.mp3", [(2, 44100), (1, 44100)], mp3)
    got = np.asarray(fio.load_audio(path))
    np.testing.assert_array_equal(got, ffmpeg.audio(path, 2))
    assert got.shape[1] > 2 * 44100
    # decode_packets' filter chain is set up for the first frame's layout;
    # the change is named, with where to go instead.
    with pytest.raises(
        feedline.DecodeError, match=r"change mid-stream .*channel_layout=0x3.*channel_layout=0x4.*load_audio"
    ):
        fio.decode_packets(fio.demux_audio(path))
    # 44.1 then 22.05 kHz: the second second is resampled to the first's
    # rate, not read as 44.1 kHz samples (which made it half as long).
    path = _joined(tmp_path, ffmpeg, "rate-change.aac", [(1, 44100), (1, 22050)], ["-c:a", "aac", "-f", "adts"])
    got = np.asarray(fio.load_audio(path))
    np.testing.assert_array_equal(got, ffmpeg.audio(path, 1))
    assert got.shape[1] > 2 * 44100


def test_the_fuzzers_layout_change_decodes_what_it_can(caplog):
    # The fuzzer's input itself (kept as a seed): a stereo MP3 frame, then a
    # mono one, then damage. It used to crash the process in libswresample;
    # the damaged packets now cost their samples and a warning.
    seed = pathlib.Path(__file__).resolve().parents[2] / "fuzz/corpus/audio/regression-layout-change.mp3"
    got = np.asarray(fio.load_audio(seed))
    assert got.dtype == np.float32 and got.shape[0] == 2 and got.shape[1] > 0
    assert np.isfinite(got).all()
    assert "regression-layout-change.mp3: 3 packet(s) failed to decode" in caplog.text


@pytest.mark.parametrize("samples", [5, 16, 31, 40])
@pytest.mark.parametrize("rate", [4000, 6000, 16000, 44100])
def test_a_clip_shorter_than_the_resamplers_filter_is_resampled_whole(tmp_path, ffmpeg, samples, rate):
    # libswresample keeps back the input its filter has not passed, even
    # when drained: 16 samples at 8 kHz gave none at 16 kHz (the ffmpeg
    # CLI's -ar too) and 31 gave 19 of 23 at 6 kHz. Each clip now comes out
    # within one sample of its length at the new rate.
    path = tmp_path / "short.wav"
    ffmpeg(
        "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=8000:duration=1",
        "-af", f"atrim=end_sample={samples}", "-c:a", "pcm_s16le", path,
    )  # fmt: skip
    assert np.asarray(fio.load_audio(path)).shape == (1, samples)
    got = np.asarray(fio.load_audio(path, sample_rate=rate))
    assert abs(got.shape[1] - samples * rate / 8000) <= 1, got.shape
    if rate == 16000:
        # The tone itself, not silence: away from the clip's two edges it is
        # the 1/8-amplitude sine at the new rate.
        t = np.arange(got.shape[1]) / rate
        want = np.sin(2 * np.pi * 440 * t) / 8
        inner = slice(4, got.shape[1] - 4)
        np.testing.assert_allclose(got[0, inner], want[inner], atol=0.02)


def _wav_at(rate: int) -> bytes:
    import io
    import wave

    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes((np.sin(np.arange(4096) / 10) * 3000).astype("<i2").tobytes())
    return out.getvalue()


def test_a_sample_rate_no_audio_has_is_a_decode_error():
    # The fuzzer's find (kept as a seed): a WAV header claiming 805 MHz. It
    # decoded "fine" at that rate, and resampling it to 8 kHz set up a
    # filter 100,000 times the usual length: 9 s for 137 bytes.
    seed = pathlib.Path(__file__).resolve().parents[2] / "fuzz/corpus/audio/regression-huge-sample-rate.wav"
    for kw in ({}, {"sample_rate": 8000}):
        with pytest.raises(feedline.DecodeError, match=r"regression-huge-sample-rate.wav: .* 805354368 Hz, is above"):
            fio.load_audio(seed, **kw)
    huge = _wav_at(805_354_368)
    with pytest.raises(feedline.DecodeError, match="805354368 Hz, is above 8000000 Hz"):
        fio.decode_packets(fio.demux_audio(huge), filter_desc=fio.get_audio_filter_desc(sample_rate=8000))
    with pytest.raises(PipelineFailure, match="805354368 Hz"):
        p = (
            PipelineBuilder()
            .add_source([huge])
            .pipe(ops.load_audio(sample_rate=8000))
            .add_sink(1)
            .build(num_threads=1, max_failures=0)
        )
        with p.auto_stop():
            list(p)
    # High but real rates still load and resample (768 kHz studio audio).
    got = np.asarray(fio.load_audio(_wav_at(768_000), sample_rate=8000))
    assert got.shape == (1, 43)


@pytest.mark.parametrize(
    ("name", "encoder"),
    [("lame.mp3", ["-c:a", "libmp3lame"]), ("native.m4a", ["-c:a", "aac"]), ("lossless.flac", ["-c:a", "flac"])],
)
def test_a_damaged_packet_costs_its_samples_not_the_file(tmp_path, ffmpeg, caplog, name, encoder):
    path = tmp_path / name
    ffmpeg.sine(path, 1, 44100, 3, encoder)
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 300] = b"\xff" * 300
    path.write_bytes(data)
    got = np.asarray(fio.load_audio(path))
    # What the CLI decodes of the same file, which skips the damage too.
    np.testing.assert_array_equal(got, ffmpeg.audio(path, 1))
    assert got.shape[1] > 44100
    assert f"{name}: " in caplog.text and "packet(s) failed to decode; first: a " in caplog.text


def test_audio_of_which_nothing_decodes_raises_naming_the_first_error(tmp_path, ffmpeg):
    path = tmp_path / "ruined.flac"
    ffmpeg.sine(path, 1, 44100, 1, ["-c:a", "flac"])
    data = bytearray(path.read_bytes())
    first = data.index(b"\xff\xf8")  # the first frame's sync code
    data[first + 8 :] = b"\xff" * (len(data) - first - 8)  # every frame's body
    path.write_bytes(data)
    with pytest.raises(feedline.DecodeError, match=r"ruined.flac: no frame decoded; a (packet|frame) failed"):
        fio.load_audio(path)
