"""Encoding and muxing (Muxer, encoders, frames from arrays, save_image,
encode_image): round trips through the ``ffmpeg`` CLI and ``ffprobe``;
lossless codecs must give the input back exactly, lossy ones within a PSNR."""

from __future__ import annotations

import gc
import json
import os
import subprocess

import numpy as np
import pytest

import feedline
import feedline.io as fio

W, H = 96, 64


def _probe(path) -> dict:
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-show_streams", "-show_format", "-count_frames", "-of", "json", str(path)],
        check=True,
        capture_output=True,
    ).stdout
    return json.loads(out)


def _cli_raw(path, pix_fmt: str) -> bytes:
    """The ``ffmpeg`` CLI's decode of ``path`` as raw ``pix_fmt`` frames."""
    cmd = ["ffmpeg", "-v", "error", "-i", str(path), "-f", "rawvideo", "-pix_fmt", pix_fmt, "-"]
    return subprocess.run(cmd, check=True, capture_output=True).stdout


def _rgb(path) -> np.ndarray:
    return np.frombuffer(_cli_raw(path, "rgb24"), np.uint8)


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


def _video(n: int = 12) -> np.ndarray:
    """Smooth moving colour waves: compressible, not flat, and without the
    sharp colour edges that 4:2:0 chroma cannot keep."""
    y, x = np.mgrid[0:H, 0:W].astype(np.float64)
    frames = []
    for t in range(n):
        r = 128 + 90 * np.sin(x / 11 + t / 4)
        g = 128 + 90 * np.sin(y / 9 - t / 5)
        b = 128 + 90 * np.sin((x + y) / 14 + t / 3)
        frames.append(np.stack([r, g, b], axis=-1))
    return np.rint(frames).astype(np.uint8)


def _encode_all(muxer, enc, frames) -> None:
    """Opens ``muxer`` and writes each Frames of ``frames`` through ``enc``
    (stream 0), then what the flush gives."""
    with muxer.open():
        for f in frames:
            packets = enc.encode(f)
            if packets is not None:
                muxer.write(0, packets)
        rest = enc.flush()
        if rest is not None:
            muxer.write(0, rest)


def _write_video(path, frames, *, encoder=None, pix_fmt="yuv420p", options=None, fmt=None, rate=25):
    muxer = fio.Muxer(path, format=fmt)
    cfg = fio.video_encode_config(height=H, width=W, frame_rate=rate, pix_fmt=pix_fmt)
    enc = muxer.add_encode_stream(cfg, encoder=encoder, encoder_config=options)
    # Several calls, as a stream.
    parts = (fio.create_reference_video_frame(frames[i : i + 5], "rgb24", rate, i) for i in range(0, len(frames), 5))
    _encode_all(muxer, enc, parts)


@pytest.mark.parametrize(
    ("name", "encoder", "pix_fmt", "options"),
    [
        ("ffv1.mkv", "ffv1", "bgr0", None),
        ("rgb.nut", "rawvideo", "rgb24", None),
        ("png.mov", "png", "rgb24", None),
        ("x264rgb.mkv", "libx264rgb", "rgb24", {"qp": "0"}),
    ],
)
def test_lossless_video_gives_the_frames_back(tmp_path, ffmpeg, name, encoder, pix_fmt, options):
    frames = _video()
    path = tmp_path / name
    _write_video(path, frames, encoder=encoder, pix_fmt=pix_fmt, options=options)
    np.testing.assert_array_equal(ffmpeg.video(path, (H, W, 3)), frames)
    probe = _probe(path)
    (stream,) = probe["streams"]
    assert (stream["width"], stream["height"]) == (W, H)
    assert int(stream["nb_read_frames"]) == len(frames)


def test_a_muxer_in_memory_writes_the_same_file(tmp_path, ffmpeg):
    # MOV/MP4 in memory needs seeking back to write its sizes, as a file does.
    frames = _video()
    muxer = fio.Muxer(None, format="mov")
    cfg = fio.video_encode_config(height=H, width=W, frame_rate=25, pix_fmt="rgb24")
    enc = muxer.add_encode_stream(cfg, encoder="png")
    with muxer.open():
        with pytest.raises(ValueError, match="close the Muxer before taking its bytes"):
            muxer.getvalue()
        muxer.write(0, enc.encode(fio.create_reference_video_frame(frames, "rgb24", 25)))
        rest = enc.flush()
        if rest is not None:
            muxer.write(0, rest)
    data = muxer.getvalue()
    assert data[4:8] == b"ftyp" and muxer.getvalue() is data  # the same bytes on every call
    np.testing.assert_array_equal(np.asarray(fio.load_video(data)), frames)
    path = tmp_path / "mem.mov"
    path.write_bytes(data)
    np.testing.assert_array_equal(ffmpeg.video(path, (H, W, 3)), frames)
    assert int(_probe(path)["streams"][0]["nb_read_frames"]) == len(frames)
    with pytest.raises(ValueError, match="needs format="):
        fio.Muxer(None)
    with pytest.raises(ValueError, match="not a Muxer in memory"):
        fio.Muxer(tmp_path / "f.mp4").getvalue()


def _yuv420p(n: int = 12) -> np.ndarray:
    """Smooth moving planes as convert_frames lays out yuv420p: (N, 1, H*3/2, W)."""
    y, x = np.mgrid[0:H, 0:W].astype(np.float64)
    cy, cx = np.mgrid[0 : H // 2, 0 : W // 2].astype(np.float64)
    out = []
    for t in range(n):
        luma = 128 + 80 * np.sin(x / 9 + t / 4) * np.cos(y / 13 - t / 6)
        u = 128 + 40 * np.sin(cx / 7 + t / 5)
        v = 128 + 40 * np.cos(cy / 6 - t / 3)
        out.append(np.concatenate([luma.ravel(), u.ravel(), v.ravel()]).reshape(1, H * 3 // 2, W))
    return np.rint(out).astype(np.uint8)


@pytest.mark.parametrize(
    ("name", "encoder", "options"),
    [
        ("h264.mp4", "libx264", {"crf": "12", "preset": "fast"}),
        ("hevc.mp4", "libx265", {"crf": "12", "x265-params": "log-level=none"}),
        ("vp9.webm", "libvpx-vp9", {"crf": "10", "b": "0", "deadline": "realtime", "cpu-used": "8"}),
    ],
)
def test_lossy_video_is_within_40_db_and_ffprobe_agrees(tmp_path, ffmpeg, name, encoder, options):
    frames = _yuv420p()
    path = tmp_path / name
    muxer = fio.Muxer(path)
    enc = muxer.add_encode_stream(
        fio.video_encode_config(height=H, width=W, frame_rate=25, pix_fmt="yuv420p"),
        encoder=encoder,
        encoder_config=options,
    )
    _encode_all(muxer, enc, [fio.create_reference_video_frame(frames, "yuv420p", 25)])
    got = ffmpeg.video(path, (H * 3 // 2, W), pix_fmt="yuv420p")
    assert got.shape == (len(frames), H * 3 // 2, W)
    assert _psnr(got, frames[:, 0]) >= 40
    (stream,) = _probe(path)["streams"]
    assert int(stream["nb_read_frames"]) == len(frames)
    assert stream["avg_frame_rate"] == "25/1"
    assert (stream["width"], stream["height"], stream["codec_name"]) == (W, H, name.split(".")[0])
    # And feedline reads back what it wrote.
    assert fio.load_video(path).shape == (len(frames), H, W, 3)


def test_decoded_frames_follow_the_encoders_gop_not_the_sources(media, tmp_path):
    # Decoded frames carry their type (I, P, B); libx264 honours a given
    # type, so the source's key frames (every 25th) came out as key frames
    # too, and the GOP of 10 was cut short at 25.
    source = fio.Demuxer(media / "h264_420.mp4").video_codec
    frames = fio.decode_packets(fio.demux_video(media / "h264_420.mp4"), filter_desc=None)
    muxer = fio.Muxer(None, format="mp4")
    cfg = fio.video_encode_config(
        height=source.height, width=source.width, frame_rate=25, pix_fmt="yuv420p", gop_size=10, max_b_frames=0
    )
    enc = muxer.add_encode_stream(cfg, encoder="libx264")
    _encode_all(muxer, enc, [frames])
    path = tmp_path / "gop10.mp4"
    path.write_bytes(muxer.getvalue())
    flags = subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v", "-show_entries", "packet=flags", "-of", "csv=p=0", path],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert len(flags) == 50
    assert [i for i, f in enumerate(flags) if f.startswith("K")] == [0, 10, 20, 30, 40]


def test_rgb_frames_are_converted_for_a_yuv_encoder(tmp_path, ffmpeg):
    # The default encoder of .mp4 is libx264 and takes yuv420p; the frames
    # are rgb24. The loss is 4:2:0 chroma's, as for the CLI's conversion.
    frames = _video()
    path = tmp_path / "default.mp4"
    _write_video(path, frames, options={"crf": "10"})
    (stream,) = _probe(path)["streams"]
    assert (stream["codec_name"], stream["pix_fmt"]) == ("h264", "yuv420p")
    assert _psnr(ffmpeg.video(path, (H, W, 3)), frames) >= 35


def test_lossless_audio_gives_the_samples_back(tmp_path, ffmpeg):
    rng = np.random.default_rng(0)
    pcm = rng.integers(-20000, 20000, size=(48000, 2), dtype=np.int16)
    for name, fmt in [("a.flac", "s16"), ("a.wav", "s16")]:
        path = tmp_path / name
        muxer = fio.Muxer(path)
        enc = muxer.add_encode_stream(fio.audio_encode_config(num_channels=2, sample_rate=48000, sample_fmt=fmt))
        with muxer.open():
            for i in range(0, len(pcm), 7000):  # sizes the encoder must regroup
                p = enc.encode(fio.create_reference_audio_frame(pcm[i : i + 7000], fmt, 48000, i))
                if p is not None:
                    muxer.write(0, p)
            rest = enc.flush()
            if rest is not None:
                muxer.write(0, rest)
        out = subprocess.run(
            ["ffmpeg", "-v", "error", "-i", str(path), "-f", "s16le", "-"], check=True, capture_output=True
        ).stdout
        np.testing.assert_array_equal(np.frombuffer(out, np.int16).reshape(-1, 2), pcm)
        (stream,) = _probe(path)["streams"]
        assert int(stream["sample_rate"]) == 48000 and int(stream["channels"]) == 2


def _two_tones(rate: int, seconds: float = 1.0) -> np.ndarray:
    """Two sine tones (440 and 1250 Hz), float64, peak 0.6."""
    t = np.arange(int(rate * seconds)) / rate
    return 0.4 * np.sin(2 * np.pi * 440 * t) + 0.2 * np.sin(2 * np.pi * 1250 * t)


def _audio_psnr(got: np.ndarray, want: np.ndarray) -> float:
    """PSNR (dB) against full scale 1.0, over the samples of ``want``."""
    err = got[: len(want)].astype(np.float64) - want[: len(got)]
    return float(10 * np.log10(1.0 / np.mean(err**2)))


def _encode_audio(path, chunks, cfg, encoder=None):
    """Writes [(samples, sample_fmt, rate, pts)] through one encoder."""
    muxer = fio.Muxer(path)
    enc = muxer.add_encode_stream(cfg, encoder=encoder)
    _encode_all(muxer, enc, (fio.create_reference_audio_frame(*chunk) for chunk in chunks))
    return enc


def _decoded_audio(path) -> np.ndarray:
    """(channels, samples) float32, decoded by feedline."""
    return fio.to_numpy(fio.convert_frames(fio.decode_packets(fio.demux_audio(path))))


@pytest.mark.parametrize(
    ("name", "encoder", "fmt", "bit_rate"), [("a.m4a", "aac", "fltp", 384000), ("a.opus", "libopus", "flt", 256000)]
)
def test_lossy_audio_is_within_40_db_and_ffprobe_agrees(tmp_path, name, encoder, fmt, bit_rate):
    rate = 48000
    tone = _two_tones(rate).astype(np.float32)
    samples = np.stack([tone, tone])  # (C, N) planar
    if fmt == "flt":
        samples = np.ascontiguousarray(samples.T)  # (N, C) packed
    first, rest = (samples[:, :1000], samples[:, 1000:]) if fmt == "fltp" else (samples[:1000], samples[1000:])
    path = tmp_path / name
    cfg = fio.audio_encode_config(num_channels=2, sample_rate=rate, sample_fmt=fmt, bit_rate=bit_rate)
    enc = _encode_audio(path, [(first, fmt, rate, 0), (rest, fmt, rate, 1000)], cfg, encoder)
    assert enc.frame_size > 0
    back = _decoded_audio(path)
    # The encoder's priming samples are trimmed on decode: sample 0 is the
    # first sample written (a shift of one sample costs ~20 dB here).
    assert back.shape[0] == 2 and abs(back.shape[1] - rate) < enc.frame_size
    for channel in back:
        assert _audio_psnr(channel, tone) >= 40
    (stream,) = _probe(path)["streams"]
    assert int(stream["sample_rate"]) == rate and int(stream["channels"]) == 2
    assert abs(float(stream["duration"]) - 1.0) < enc.frame_size / rate


def test_audio_of_another_format_rate_or_layout_is_converted(tmp_path, ffmpeg):
    # Format only: float samples k / 32768 become exactly the int16 k in a
    # FLAC s16 stream.
    rng = np.random.default_rng(1)
    pcm = rng.integers(-20000, 20000, size=(24000, 2), dtype=np.int16)
    path = tmp_path / "f.flac"
    cfg = fio.audio_encode_config(num_channels=2, sample_rate=48000, sample_fmt="s16")
    _encode_audio(path, [((pcm / 32768).astype(np.float32), "flt", 48000, 0)], cfg)
    out = subprocess.run(
        ["ffmpeg", "-v", "error", "-i", str(path), "-f", "s16le", "-"], check=True, capture_output=True
    ).stdout
    np.testing.assert_array_equal(np.frombuffer(out, np.int16).reshape(-1, 2), pcm)

    # Rate and channels: mono int16 at 44.1 kHz into a 48 kHz stereo AAC
    # stream, in pieces; mono goes to both channels at -3 dB (FFmpeg's
    # centre mix level), and the resampler's tail comes out at flush().
    pcm = np.rint(_two_tones(44100) * 32767).astype(np.int16)[:, None]
    path = tmp_path / "r.m4a"
    cfg = fio.audio_encode_config(num_channels=2, sample_rate=48000, sample_fmt="fltp", bit_rate=384000)
    chunks = [(pcm[i : i + 7000], "s16", 44100, i) for i in range(0, len(pcm), 7000)]
    enc = _encode_audio(path, chunks, cfg, "aac")
    back = _decoded_audio(path)
    assert back.shape[0] == 2 and abs(back.shape[1] - 48000) < enc.frame_size
    for channel in back:
        assert _audio_psnr(channel, _two_tones(48000) * np.sqrt(0.5)) >= 40
    (stream,) = _probe(path)["streams"]
    assert int(stream["sample_rate"]) == 48000 and int(stream["channels"]) == 2

    # The first frame fixes the stream's input parameters.
    muxer = fio.Muxer(tmp_path / "x.m4a")
    enc = muxer.add_encode_stream(cfg, encoder="aac")
    with muxer.open():
        enc.encode(fio.create_reference_audio_frame(pcm[:100], "s16", 44100, 0))
        with pytest.raises(
            ValueError, match="changed within the stream: s16 at 44100 Hz with 1 channel, then s16 at 48000"
        ):
            enc.encode(fio.create_reference_audio_frame(pcm[:100], "s16", 48000, 100))


def test_remux_copies_packets_exactly(tmp_path, media, ffmpeg):
    src = media / "h264_420.mp4"
    packets = fio.demux_video(src)
    out = tmp_path / "remux.mkv"
    muxer = fio.Muxer(out)
    index = muxer.add_remux_stream(packets.codec)
    with muxer.open():
        muxer.write(index, packets)
    assert not packets.consumed  # writing does not consume
    np.testing.assert_array_equal(ffmpeg.raw(out), ffmpeg.raw(src))
    assert fio.demux_video(out)._payloads() == packets._payloads()


@pytest.mark.parametrize(
    ("fmt", "pix_fmt", "exact"),
    [
        ("png", "rgb24", True),
        ("png", "gray8", True),
        ("png", "gray16be", True),
        ("tiff", "rgb24", True),
        ("bmp", "rgb24", True),
    ],
)
def test_lossless_images_round_trip(tmp_path, ffmpeg, fmt, pix_fmt, exact):
    rng = np.random.default_rng(1)
    if pix_fmt == "rgb24":
        img = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
    elif pix_fmt == "gray8":
        img = rng.integers(0, 256, (H, W), dtype=np.uint8)
    else:
        img = rng.integers(0, 65536, (H, W), dtype=np.uint16)
    path = tmp_path / f"img.{fmt}"
    fio.save_image(path, img if pix_fmt != "gray16be" else img.astype(np.uint16), pix_fmt=pix_fmt)
    out_fmt = {"rgb24": "rgb24", "gray8": "gray", "gray16be": "gray16le"}[pix_fmt]
    dtype = np.uint16 if pix_fmt == "gray16be" else np.uint8
    raw = _cli_raw(path, out_fmt)
    back = np.frombuffer(raw, dtype).reshape(img.shape)
    if pix_fmt == "gray16be":
        # The array is native order; gray16be names how the encoder stores it.
        img = img.byteswap()
    np.testing.assert_array_equal(back, img)


def _png_chunks(data: bytes) -> list:
    """(type, payload) of every chunk, each CRC checked."""
    import struct
    import zlib

    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, at = [], 8
    while at < len(data):
        (n,) = struct.unpack(">I", data[at : at + 4])
        kind, payload = data[at + 4 : at + 8], data[at + 8 : at + 8 + n]
        assert struct.unpack(">I", data[at + 8 + n : at + 12 + n])[0] == zlib.crc32(kind + payload)
        chunks.append((kind.decode(), payload))
        at += 12 + n
    return chunks


@pytest.mark.parametrize("level", [-1, 0, 9])
@pytest.mark.parametrize(
    ("pix_fmt", "shape", "dtype", "out_fmt"),
    [
        ("rgb24", (300, 410, 3), np.uint8, "rgb24"),
        ("rgba", (300, 410, 4), np.uint8, "rgba"),
        ("gray8", (300, 410), np.uint8, "gray"),
        ("gray16le", (300, 410), np.uint16, "gray16le"),
        ("gray16be", (300, 410), np.uint16, "gray16be"),
    ],
)
def test_png_writer_gives_the_pixels_back_in_valid_chunks(tmp_path, level, pix_fmt, shape, dtype, out_fmt):
    # Noise does not compress: several IDAT chunks of 256 KiB. Each chunk's
    # CRC is checked here, the pixels by the ffmpeg CLI and Pillow.
    rng = np.random.default_rng(3)
    img = rng.integers(0, np.iinfo(dtype).max, shape, dtype=dtype, endpoint=True)
    data = fio.encode_image(img, format="png", pix_fmt=pix_fmt, compression_level=level)
    kinds = [k for k, _ in _png_chunks(data)]
    assert kinds[0] == "IHDR" and kinds[-1] == "IEND" and set(kinds[1:-1]) == {"IDAT"}
    assert len(kinds) - 2 >= (2 if img.nbytes > 300_000 else 1)
    path = tmp_path / "x.png"
    path.write_bytes(data)
    raw = _cli_raw(path, out_fmt)
    # The array's bytes are read in the order pix_fmt names (gray16be: as
    # big-endian samples), and ffmpeg writes them back the same way.
    np.testing.assert_array_equal(np.frombuffer(raw, np.uint8), img.view(np.uint8).ravel())
    pil = pytest.importorskip("PIL.Image")
    import io

    back = np.asarray(pil.open(io.BytesIO(data)))
    want = img.byteswap() if pix_fmt == "gray16be" else img
    np.testing.assert_array_equal(back.astype(np.int64), want.astype(np.int64))


def test_gray16_takes_int16_as_the_same_bits():
    # SPDL documents int16 for 16-bit grey; the file is the same as from the
    # uint16 array of the same bits.
    img = np.random.default_rng(2).integers(0, 65536, (H, W), dtype=np.uint16)
    want = fio.encode_image(img, format="png", pix_fmt="gray16le")
    assert fio.encode_image(img.view(np.int16), format="png", pix_fmt="gray16le") == want
    with pytest.raises(ValueError, match=r"uint16 or int16 \(N, H, W\), got int32"):
        fio.encode_image(img.astype(np.int32), format="png", pix_fmt="gray16le")


def test_png_bytes_decode_with_feedline_and_pillow(tmp_path):
    pil = pytest.importorskip("PIL.Image")
    import io

    img = _video(1)[0]
    blob = fio.encode_image(img, format="png")
    assert blob[:8] == b"\x89PNG\r\n\x1a\n"
    np.testing.assert_array_equal(fio.to_numpy(fio.decode_image(blob)), img)
    np.testing.assert_array_equal(np.asarray(pil.open(io.BytesIO(blob))), img)


def test_jpeg_and_webp_are_within_40_db(tmp_path):
    img = _video(1)[0]
    jpeg = fio.encode_image(img, format="jpeg", quality=2)
    assert jpeg[:2] == b"\xff\xd8"
    assert _psnr(fio.to_numpy(fio.decode_image(jpeg)), img) >= 40
    lossless = fio.encode_image(img, format="webp", lossless=True)
    assert lossless[:4] == b"RIFF" and lossless[8:12] == b"WEBP"
    path = tmp_path / "x.webp"
    path.write_bytes(lossless)
    np.testing.assert_array_equal(fio.to_numpy(fio.load_image(path)), img)
    lossy = fio.encode_image(img, format="webp", quality=100)
    path.write_bytes(lossy)
    assert _psnr(fio.to_numpy(fio.load_image(path)), img) >= 35  # WebP is 4:2:0


def test_torch_tensors_encode_like_arrays():
    torch = pytest.importorskip("torch")
    img = _video(1)[0]
    assert fio.encode_image(torch.from_numpy(img), format="png") == fio.encode_image(img, format="png")


def test_bad_arrays_and_configs_raise_value_error(tmp_path):
    img = _video(1)[0]
    with pytest.raises(ValueError, match=r"uint8 \(N, H, W, 3\)"):
        fio.create_reference_video_frame(img, "rgb24", 25)  # no N
    with pytest.raises(ValueError, match="uint8"):
        fio.create_reference_video_frame(img[None].astype(np.float32), "rgb24", 25)
    with pytest.raises(ValueError, match="pix_fmt"):
        fio.create_reference_video_frame(img[None], "p010le", 25)
    with pytest.raises(ValueError, match=r"float32 \(channels, samples\)"):
        fio.create_reference_audio_frame(np.zeros((2, 100), np.int16), "fltp", 48000)
    with pytest.raises(ValueError, match="is not png"):
        fio.encode_image(img, format="gif")
    with pytest.raises(ValueError, match="cannot tell the image format"):
        fio.save_image(tmp_path / "x.xyz", img)
    m = fio.Muxer(tmp_path / "x.mp4")
    with pytest.raises(ValueError, match=r"libx264 encoder does not take pix_fmt \"rgb24\"; it takes yuv420p"):
        m.add_encode_stream(fio.video_encode_config(height=H, width=W, frame_rate=25), encoder="libx264")
    with pytest.raises(ValueError, match="no encoder named"):
        m.add_encode_stream(fio.video_encode_config(height=H, width=W, frame_rate=25), encoder="no_such")
    with pytest.raises(ValueError, match="not a video encoder"):
        m.add_encode_stream(fio.video_encode_config(height=H, width=W, frame_rate=25), encoder="aac")
    with pytest.raises(ValueError, match="does not take 44100 Hz"):
        m.add_encode_stream(
            fio.audio_encode_config(num_channels=2, sample_rate=44100, sample_fmt="flt"), encoder="libopus"
        )
    with pytest.raises(ValueError, match="unknown colorspace"):
        m.add_encode_stream(
            fio.video_encode_config(height=H, width=W, frame_rate=25, pix_fmt="yuv420p", colorspace="nope"),
            encoder="libx264",
        )
    with pytest.raises(ValueError, match="unused|not used|no_such_option"):
        m.add_encode_stream(
            fio.video_encode_config(height=H, width=W, frame_rate=25, pix_fmt="yuv420p"),
            encoder="libx264",
            encoder_config={"no_such_option": "1"},
        )
    with pytest.raises(ValueError, match="cannot tell the format"):
        fio.Muxer(tmp_path / "x.unknownext")


def test_calls_out_of_order_raise(tmp_path, media):
    path = tmp_path / "x.mkv"
    m = fio.Muxer(path)
    with pytest.raises(ValueError, match="add a stream"):
        m.open()
    enc = m.add_encode_stream(
        fio.video_encode_config(height=H, width=W, frame_rate=25, pix_fmt="yuv420p"), encoder="libx264"
    )
    with pytest.raises(ValueError, match="takes 96x64 frames"):
        enc.encode(fio.create_reference_video_frame(np.zeros((1, 32, 32, 3), np.uint8), "rgb24", 25))
    packets = fio.demux_video(media / "h264_420.mp4")
    with pytest.raises(ValueError, match="open the Muxer"):
        m.write(0, packets)
    m.open()
    with pytest.raises(ValueError, match="before the Muxer is opened"):
        m.add_encode_stream(fio.video_encode_config(height=H, width=W, frame_rate=25, pix_fmt="yuv420p"))
    with pytest.raises(ValueError, match="no stream 3"):
        m.write(3, packets)
    with pytest.raises(ValueError, match="stream 0 is video"):
        m.write(0, fio.demux_audio(_tone(tmp_path)))
    with pytest.raises(TypeError, match="expected video_encode_config"):
        m.add_encode_stream({"width": W})
    m.close()
    with pytest.raises(ValueError, match="closed"):
        m.write(0, packets)
    with pytest.raises(ValueError, match="closed"):
        m.close()
    enc.flush()
    with pytest.raises(ValueError, match="flushed"):
        enc.encode(fio.create_reference_video_frame(_video(1), "rgb24", 25))


def _tone(tmp_path):
    path = tmp_path / "tone.wav"
    subprocess.run(
        ["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "sine=duration=0.2", str(path)], check=True, capture_output=True
    )
    return path


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_muxer_left_by_an_exception_releases_its_file(tmp_path, ffmpeg):
    frames = _video()
    before = _open_fds()
    path = tmp_path / "crash.mkv"
    with pytest.raises(RuntimeError, match="boom"):
        m = fio.Muxer(path)
        enc = m.add_encode_stream(
            fio.video_encode_config(height=H, width=W, frame_rate=25, pix_fmt="yuv420p"), encoder="libx264"
        )
        with m.open():
            m.write(0, enc.encode(fio.create_reference_video_frame(frames, "rgb24", 25)) or enc.flush())
            raise RuntimeError("boom")
    assert _open_fds() == before
    # What was written before the exception is a readable file.
    assert _probe(path)["streams"][0]["codec_name"] == "h264"
    # Garbage-collected without close(): the file is released too.
    m2 = fio.Muxer(tmp_path / "dropped.mkv")
    m2.add_encode_stream(
        fio.video_encode_config(height=H, width=W, frame_rate=25, pix_fmt="yuv420p"), encoder="libx264"
    )
    m2.open()
    assert _open_fds() == before + 1
    del m2
    gc.collect()
    assert _open_fds() == before


def _run(builder) -> list:
    p = builder.build(num_threads=2, max_failures=0)
    with p.auto_stop():
        return list(p)


def test_native_transcode_pipeline_demux_decode_scale_encode(media):
    from feedline.io import ops
    from feedline.pipeline import PipelineBuilder

    src = (media / "h264_420.mp4").read_bytes()
    scale = "scale=w=48:h=32,format=pix_fmts=rgb24"
    builder = (
        PipelineBuilder()
        .add_source([src, src])
        .pipe(ops.demux_video())
        .pipe(ops.decode_packets(filter_desc=scale))
        .pipe(ops.encode_video(format="matroska", encoder="ffv1", pix_fmt="bgr0"), concurrency=2)
        .add_sink(2)
    )
    outputs = _run(builder)
    assert len(outputs) == 2 and all(isinstance(b, bytes) for b in outputs)
    want = fio.to_numpy(fio.load_video(src, filter_desc=scale))
    for blob in outputs:
        # FFV1 is lossless: the file holds exactly the scaled frames.
        np.testing.assert_array_equal(fio.to_numpy(fio.load_video(blob)), want)
        stream = fio.Demuxer(blob).video_codec
        assert stream.name == "ffv1" and (stream.width, stream.height) == (48, 32)
        assert stream.frame_rate == (25, 1)


def test_native_encode_video_keeps_the_frames_colour_tags_and_pixel_shape(tmp_path, ffmpeg):
    from feedline.io import ops
    from feedline.pipeline import PipelineBuilder

    # BT.709, full range, 4:3 pixels: the frames carry it and a transcode
    # must too, or players read the same YUV as other colours and shape.
    src = tmp_path / "bt709_pc.mkv"
    tags = ["-colorspace", "bt709", "-color_primaries", "bt709", "-color_trc", "bt709", "-color_range", "pc"]
    ffmpeg(
        *("-f", "lavfi", "-i", f"testsrc2=size={W}x{H}:rate=25:duration=0.4"),
        *("-vf", "setsar=4/3,format=yuv420p", *tags, "-c:v", "ffv1", src),
    )
    builder = (
        PipelineBuilder()
        .add_source([src.read_bytes()])
        .pipe(ops.demux_video())
        .pipe(ops.decode_packets(filter_desc=None))
        .pipe(ops.encode_video(format="matroska", encoder="ffv1", pix_fmt="yuv420p"))
        .add_sink(1)
    )
    (blob,) = _run(builder)
    out = tmp_path / "out.mkv"
    out.write_bytes(blob)
    keys = ("color_space", "color_range", "color_primaries", "color_transfer", "sample_aspect_ratio")
    want = {k: _probe(src)["streams"][0].get(k) for k in keys}
    assert want == {
        "color_space": "bt709",
        "color_range": "pc",
        "color_primaries": "bt709",
        "color_transfer": "bt709",
        "sample_aspect_ratio": "4:3",
    }
    # Matroska holds the ratio on the stream; the codec shows it, as players do.
    assert fio.Demuxer(src).video_codec.sample_aspect_ratio == (4, 3)
    assert {k: _probe(out)["streams"][0].get(k) for k in keys} == want
    # FFV1 is lossless: with the same tags, the CLI shows the same colours.
    assert _cli_raw(out, "rgb24") == _cli_raw(src, "rgb24")

    def transcode(**settings):
        builder = (
            PipelineBuilder()
            .add_source([str(src)])
            .pipe(ops.read_file())
            .pipe(ops.demux_video())
            .pipe(ops.decode_packets(filter_desc=None))
            .pipe(ops.encode_video(format="matroska", encoder="ffv1", pix_fmt="yuv420p", **settings))
            .add_sink(1)
        )
        (blob,) = _run(builder)
        out.write_bytes(blob)
        return _probe(out)["streams"][0]

    # A setting given to the op is the stream's, over the frames' own, and
    # the pixels are converted to it: full range to limited, as the CLI's
    # scale filter does (the same yuv420p, so no plain copy).
    stream = transcode(color_range="tv", sample_aspect_ratio=(1, 1))
    assert (stream.get("color_range"), stream.get("color_space")) == ("tv", "bt709")
    assert stream.get("sample_aspect_ratio") in (None, "1:1")
    diff = np.abs(_rgb(out).astype(int) - _rgb(src).astype(int))
    cli = tmp_path / "cli_tv.mkv"
    ffmpeg("-i", src, "-vf", "scale=out_range=tv", "-color_range", "tv", "-c:v", "ffv1", cli)
    assert diff.max() <= np.abs(_rgb(cli).astype(int) - _rgb(src).astype(int)).max() <= 2
    # swscale cannot change a YUV matrix: refused, not tagged over pixels
    # of another matrix. The error names the clip the frames came from.
    with pytest.raises(feedline.PipelineFailure, match="cannot convert bt709 frames to a bt470bg stream") as e:
        transcode(colorspace="bt470bg")
    assert f"<memory: frames of {src}> (stream 0)" in str(e.value)


def test_frames_pickled_to_another_process_still_name_their_file(media):
    """Frames decoded in one process (a region's worker) and encoded in
    another: the pickle carries the file's name, so the encode error still
    says which clip it was."""
    import pickle

    from feedline.io import ops
    from feedline.pipeline import PipelineBuilder

    src = media / "h264_420.mp4"
    frames = pickle.loads(pickle.dumps(fio.decode_packets(fio.demux_video(src), filter_desc=None)))
    builder = (
        PipelineBuilder()
        .add_source([frames])
        .pipe(ops.encode_video(format="matroska", encoder="ffv1", pix_fmt="yuv420p", width=64, height=48))
        .add_sink(1)
    )
    with pytest.raises(feedline.PipelineFailure, match=r"\(stream 0\)") as e:
        _run(builder)
    assert f"<memory: frames of {src}> (stream 0)" in str(e.value)


def _frame_times(path) -> list[float]:
    out = subprocess.run(
        [
            "ffprobe",
            "-v",
            "error",
            "-select_streams",
            "v:0",
            "-show_entries",
            "frame=pts_time",
            "-of",
            "json",
            str(path),
        ],
        check=True,
        capture_output=True,
    ).stdout
    return [round(float(f["pts_time"]), 3) for f in json.loads(out)["frames"]]


def test_native_encode_video_keeps_the_frames_times(tmp_path, ffmpeg):
    from feedline.io import ops
    from feedline.pipeline import PipelineBuilder

    def transcode(src, fmt, encoder):
        builder = (
            PipelineBuilder()
            .add_source([src.read_bytes()])
            .pipe(ops.demux_video())
            .pipe(ops.decode_packets(filter_desc=None))
            .pipe(ops.encode_video(format=fmt, encoder=encoder))
            .add_sink(1)
        )
        (blob,) = _run(builder)
        out = tmp_path / f"out_{encoder}.{'mkv' if fmt == 'matroska' else fmt}"
        out.write_bytes(blob)
        return out

    # Variable frame rate: frames 3, 4 and 8 of 25 fps dropped, the rest
    # at their times. Numbered at the first two frames' rate, they were
    # 0, 0.04, ..., 0.32: shorter, and moving apart.
    vfr = tmp_path / "vfr.mkv"
    drop = "select='not(eq(n\\,3)+eq(n\\,4)+eq(n\\,8))'"
    ffmpeg(
        *("-f", "lavfi", "-i", "testsrc2=size=96x64:rate=25:duration=0.48"),
        *("-vf", drop, "-fps_mode", "passthrough", "-c:v", "ffv1", vfr),
    )
    want = [0.0, 0.04, 0.08, 0.2, 0.24, 0.28, 0.36, 0.4, 0.44]
    assert _frame_times(vfr) == want
    for fmt, encoder in [("matroska", "ffv1"), ("mp4", "libx264"), ("matroska", "mpeg4")]:
        assert _frame_times(transcode(vfr, fmt, encoder)) == want, encoder
    # An encoder of fixed rates: the listed rate nearest the average (9
    # frames over 0.44 s), the clip about as long.
    assert fio.Demuxer(transcode(vfr, "mpeg", "mpeg2video")).video_codec.frame_rate == (18, 1)
    # 29.97 fps in milliseconds (33, 33, 34, ...): the average rate, not the
    # first two frames' 30.3 fps, so the last frame stays where it was.
    ntsc = tmp_path / "ntsc.mkv"
    ffmpeg("-f", "lavfi", "-i", "testsrc2=size=96x64:rate=30000/1001:duration=2", "-c:v", "ffv1", ntsc)
    src_times, out_times = _frame_times(ntsc), _frame_times(transcode(ntsc, "matroska", "ffv1"))
    assert len(out_times) == len(src_times) == 60
    assert max(abs(round((a - b) * 1000)) for a, b in zip(src_times, out_times)) <= 1  # ms


def test_a_muxer_stream_with_a_time_base_keeps_the_frames_times(tmp_path):
    frames = _video(5)

    def write(path, **time):
        muxer = fio.Muxer(path)
        cfg = fio.video_encode_config(height=H, width=W, frame_rate=25, pix_fmt="bgr0", **time)
        enc = muxer.add_encode_stream(cfg, encoder="ffv1")
        # Frames at 0, 1, 2, then 5, 6 (of 1/25 s): two frames missing.
        parts = [fio.create_reference_video_frame(frames[:3], "rgb24", 25, 0)]
        parts.append(fio.create_reference_video_frame(frames[3:], "rgb24", 25, 5))
        _encode_all(muxer, enc, parts)
        return path

    kept = write(tmp_path / "kept.mkv", time_base=(1, 25))
    assert _frame_times(kept) == [0.0, 0.04, 0.08, 0.2, 0.24]
    np.testing.assert_array_equal(fio.to_numpy(fio.load_video(kept)), frames)
    # Without one, frames are numbered at the frame rate (documented).
    assert _frame_times(write(tmp_path / "numbered.mkv")) == [0.0, 0.04, 0.08, 0.12, 0.16]
    # Times that go back are refused; a fixed-rate encoder cannot keep them.
    muxer = fio.Muxer(tmp_path / "back.mkv")
    cfg = fio.video_encode_config(height=H, width=W, frame_rate=25, pix_fmt="bgr0", time_base=(1, 25))
    enc = muxer.add_encode_stream(cfg, encoder="ffv1")
    enc.encode(fio.create_reference_video_frame(frames[:1], "rgb24", 25, 4))
    with pytest.raises(ValueError, match="frame times must increase"):
        enc.encode(fio.create_reference_video_frame(frames[1:2], "rgb24", 25, 2))
    cfg.pix_fmt = "yuv420p"
    with pytest.raises(ValueError, match="fixed frame rates only"):
        fio.Muxer(tmp_path / "x.mpg").add_encode_stream(cfg, encoder="mpeg2video")


@pytest.mark.parametrize(
    "kind, settings, match",
    [
        ("video", dict(format="nope"), 'no muxer named "nope"'),
        ("video", dict(format="matroska", encoder="nope"), 'no encoder named "nope"'),
        ("video", dict(format="matroska", encoder="flac"), "not a video encoder"),
        ("video", dict(format="wav"), "wav does not take video"),
        ("video", dict(format="matroska", encoder="ffv1", pix_fmt="yuvj420p"), 'does not take pix_fmt "yuvj420p"'),
        ("video", dict(format="mpeg", encoder="mpeg1video", frame_rate=7), "does not take 7/1 fps"),
        ("video", dict(format="matroska", colorspace="bt7099"), 'unknown colorspace "bt7099"'),
        ("video", dict(format="matroska", color_range="full range"), 'unknown color range "full range"'),
        ("video", dict(format="matroska", sample_aspect_ratio=(0, 1)), "sample aspect ratio must be positive"),
        ("audio", dict(format="wav", encoder="ffv1"), "not an audio encoder"),
        ("audio", dict(format="flac", sample_fmt="fltp"), 'does not take sample_fmt "fltp"'),
        ("audio", dict(format="wav", encoder="libopus", sample_rate=44100), "does not take 44100 Hz"),
    ],
)
def test_bad_encode_settings_are_refused_when_the_op_is_made(kind, settings, match):
    from feedline.io import ops

    # Not once per clip, each a counted failure, once frames arrive.
    make = ops.encode_video if kind == "video" else ops.encode_audio
    with pytest.raises(ValueError, match=match):
        make(**settings)


def test_native_encode_image_op_recompresses_without_the_gil():
    from feedline.io import ops
    from feedline.pipeline import PipelineBuilder

    images = [_video(3)[i] for i in range(3)]
    stored = [fio.encode_image(img, format="png", compression_level=0) for img in images]
    builder = (
        PipelineBuilder()
        .add_source(stored)
        .pipe(ops.decode_image())
        .pipe(ops.encode_image(format="png", compression_level=9))
        .add_sink(3)
    )
    blobs = _run(builder)
    assert len(blobs) == 3 and all(len(b) < len(s) for b, s in zip(blobs, stored))
    assert sorted(blobs) == sorted(fio.encode_image(img, format="png", compression_level=9) for img in images)


def test_native_audio_transcode_pipeline_is_exact_for_pcm(media, ffmpeg):
    from feedline.io import ops
    from feedline.pipeline import PipelineBuilder

    # int16 PCM -> float planar frames (the default chain) -> FLAC s16: the
    # conversion back to int16 is exact, so the FLAC holds the WAV's samples.
    src = (media / "stereo.wav").read_bytes()
    builder = (
        PipelineBuilder()
        .add_source([src, src])
        .pipe(ops.demux_audio())
        .pipe(ops.decode_packets())
        .pipe(ops.encode_audio(format="flac", sample_fmt="s16"), concurrency=2)
        .add_sink(2)
    )
    outputs = _run(builder)
    assert len(outputs) == 2
    want = ffmpeg.audio(media / "stereo.wav", 2)
    for blob in outputs:
        assert blob[:4] == b"fLaC"
        codec = fio.Demuxer(blob).audio_codec
        assert (codec.name, codec.sample_rate, codec.num_channels) == ("flac", 48000, 2)
        np.testing.assert_array_equal(fio.to_numpy(fio.load_audio(blob)), want)
    # A rate the frames do not have: resampled, same length in time.
    [blob] = _run(
        PipelineBuilder()
        .add_source([src])
        .pipe(ops.demux_audio())
        .pipe(ops.decode_packets())
        .pipe(ops.encode_audio(format="wav", sample_rate=16000, num_channels=1))
        .add_sink(1)
    )
    mono = fio.to_numpy(fio.load_audio(blob))
    assert mono.shape == (1, 16000)


# --- what a Muxer, an encoder or encode_image must not do silently ----------


def _encoded(encoder, pix_fmt, height=H, width=W):
    muxer = fio.Muxer(None, format="matroska")
    enc = muxer.add_encode_stream(
        fio.video_encode_config(height=height, width=width, frame_rate=25, pix_fmt=pix_fmt), encoder=encoder
    )
    frames = _video(4)[:, :height, :width]
    packets = enc.encode(fio.create_reference_video_frame(np.ascontiguousarray(frames), "rgb24", 25))
    rest = enc.flush()
    return [p for p in (packets, rest) if p is not None]


def test_write_refuses_packets_of_another_codec_or_size(tmp_path):
    # They made a file nothing could decode ("header damaged").
    m = fio.Muxer(tmp_path / "x.mkv")
    m.add_encode_stream(fio.video_encode_config(height=H, width=W, frame_rate=25, pix_fmt="bgr0"), encoder="ffv1")
    m.add_encode_stream(fio.video_encode_config(height=H, width=W, frame_rate=25, pix_fmt="yuv420p"), encoder="mpeg4")
    with m.open():
        with pytest.raises(ValueError, match=r"stream 1 \(mpeg4\) got packets of codec ffv1"):
            m.write(1, _encoded("ffv1", "bgr0")[0])
        with pytest.raises(ValueError, match=r"stream 0 \(ffv1\) got packets of size 48x32, not 96x64"):
            m.write(0, _encoded("ffv1", "bgr0", height=32, width=48)[0])
        for p in _encoded("ffv1", "bgr0"):
            m.write(0, p)  # its own kind of packets are taken
        for p in _encoded("mpeg4", "yuv420p"):
            m.write(1, p)
    streams = _probe(tmp_path / "x.mkv")["streams"]
    assert [(s["codec_name"], int(s["nb_read_frames"])) for s in streams] == [("ffv1", 4), ("mpeg4", 4)]


def test_remux_refuses_packets_filtered_to_another_setup(tmp_path, ffmpeg):
    src = tmp_path / "src.mp4"
    _write_video(src, _video(10), encoder="libx264")
    packets = fio.demux_video(src)
    m = fio.Muxer(tmp_path / "out.mkv")
    m.add_remux_stream(packets.codec)
    annexb = fio.apply_bsf(fio.demux_video(src), "h264_mp4toannexb")
    with m.open():
        # The stream holds the MP4's avcC; Annex B packets decoded against
        # it gave "Invalid NAL unit size".
        with pytest.raises(ValueError, match=r"extradata"):
            m.write(0, annexb)
        m.write(0, packets)
    assert int(_probe(tmp_path / "out.mkv")["streams"][0]["nb_read_frames"]) == 10


def test_in_memory_faststart_is_refused(tmp_path):
    m = fio.Muxer(None, format="mp4")
    m.add_encode_stream(fio.video_encode_config(height=H, width=W, frame_rate=25, pix_fmt="yuv420p"), encoder="mpeg4")
    # FFmpeg moves the index by reading the output back by its name: in
    # memory the close failed and getvalue() handed out a file without one.
    with pytest.raises(ValueError, match="faststart"):
        m.open({"movflags": "+faststart"})


def test_an_unknown_muxer_option_closes_the_muxer_and_removes_its_file(tmp_path):
    path = tmp_path / "x.mp4"
    m = fio.Muxer(path)
    m.add_encode_stream(fio.video_encode_config(height=H, width=W, frame_rate=25, pix_fmt="yuv420p"), encoder="mpeg4")
    with pytest.raises(ValueError, match="movflagz"):
        m.open({"movflagz": "+faststart"})
    assert not path.exists()  # the header was written, then undone
    with pytest.raises(ValueError, match="closed"):  # not left open
        m.open()


def test_a_header_refused_leaves_no_partial_file(tmp_path):
    path = tmp_path / "x.mp4"
    m = fio.Muxer(path)
    m.add_encode_stream(
        fio.audio_encode_config(num_channels=1, sample_rate=8000, sample_fmt="s16"), encoder="pcm_s16le"
    )
    with pytest.raises(ValueError, match="header"):
        m.open()
    assert not path.exists()  # it left a 0-byte file


def test_write_errors_carry_ffmpegs_message(tmp_path):
    m = fio.Muxer(tmp_path / "x.mkv")
    m.add_encode_stream(fio.video_encode_config(height=H, width=W, frame_rate=25, pix_fmt="bgr0"), encoder="ffv1")
    packets = _encoded("ffv1", "bgr0")[0]
    with m.open():
        m.write(0, packets)
        with pytest.raises(feedline.IoError) as info:
            m.write(0, packets)  # the same timestamps again
    assert "monoton" in str(info.value).lower(), info.value  # not a bare "Invalid argument"


@pytest.mark.parametrize(
    ("fmt", "pix_fmt", "channels", "cli_fmt"),
    [
        ("png", "bgra", 4, "bgra"),
        ("png", "argb", 4, "argb"),
        ("bmp", "rgba", 4, "rgba"),
        ("tiff", "gray16be", 1, "gray16be"),
        ("tiff", "bgr24", 3, "bgr24"),
    ],
)
def test_lossless_images_keep_alpha_depth_and_rgb(tmp_path, ffmpeg, fmt, pix_fmt, channels, cli_fmt):
    # Stored before as RGB (alpha dropped), 8-bit grey (max error 249) or
    # YUV 4:4:4 (max error 2) although each format takes the input's kind.
    rng = np.random.default_rng(5)
    dtype = np.uint16 if "16" in pix_fmt else np.uint8
    shape = (H, W) if channels == 1 else (H, W, channels)
    img = rng.integers(0, np.iinfo(dtype).max, shape, dtype=dtype, endpoint=True)
    path = tmp_path / f"x.{fmt}"
    fio.save_image(path, img, pix_fmt=pix_fmt)
    raw = _cli_raw(path, cli_fmt)
    np.testing.assert_array_equal(np.frombuffer(raw, np.uint8), img.view(np.uint8).ravel())


def test_images_a_format_cannot_keep_are_refused_not_changed():
    rgba = np.zeros((H, W, 4), np.uint8)
    with pytest.raises(ValueError, match="alpha"):
        fio.encode_image(rgba, format="jpeg", pix_fmt="rgba")
    with pytest.raises(ValueError, match="16-bit"):
        fio.encode_image(np.zeros((H, W), np.uint16), format="jpeg", pix_fmt="gray16le")


@pytest.mark.parametrize("pix_fmt", ["gray8", "yuv444p", "yuv420p"])
def test_jpeg_from_grey_and_yuv(pix_fmt):
    # These took limited-range YUV, which FFmpeg's JPEG encoder refuses: no
    # JPEG at all, with an error that said only "Invalid argument".
    grey = _video(1)[0][..., 1]
    luma = np.rint(16 + grey.astype(np.float64) * 219 / 255).astype(np.uint8)  # limited range
    if pix_fmt == "gray8":
        img = grey.copy()
    elif pix_fmt == "yuv444p":
        img = np.stack([luma, np.full_like(luma, 128), np.full_like(luma, 128)])[None]
    else:
        img = np.concatenate([luma, np.full((H // 2, W), 128, np.uint8)])[None, None]
    jpeg = fio.encode_image(img, format="jpeg", pix_fmt=pix_fmt, quality=2)
    back = fio.to_numpy(fio.decode_image(jpeg))
    assert _psnr(back[..., 1] if back.ndim == 3 else back, grey) >= 38


def test_colorspace_tag_and_conversion_agree(tmp_path, ffmpeg):
    # RGB was converted with BT.601 and tagged bt709 (or bt2020): decoders
    # following the tag were off by up to 39 levels.
    colours = np.array([[255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 0], [128, 64, 200]], np.uint8)
    img = np.ascontiguousarray(np.broadcast_to(colours[:, None, None, :], (5, 16, 16, 3)))
    for cs in ["bt709", "bt2020nc", None]:
        path = tmp_path / f"{cs}.mkv"
        m = fio.Muxer(path)
        cfg = fio.video_encode_config(height=16, width=16, frame_rate=25, pix_fmt="yuv444p", colorspace=cs)
        enc = m.add_encode_stream(cfg, encoder="ffv1")
        with m.open():
            for p in (enc.encode(fio.create_reference_video_frame(img, "rgb24", 25)), enc.flush()):
                if p is not None:
                    m.write(0, p)
        raw = _cli_raw(path, "rgb24")
        back = np.frombuffer(raw, np.uint8).reshape(img.shape).astype(int)
        assert np.abs(back - img).max() <= 3, (cs, np.abs(back - img).max())


def test_flac_refuses_s32_samples_it_would_cut_to_24_bits(tmp_path, ffmpeg):
    rng = np.random.default_rng(7)
    full = rng.integers(-(2**31), 2**31 - 1, (4000, 2), dtype=np.int32)
    cfg = fio.audio_encode_config(num_channels=2, sample_rate=44100, sample_fmt="s32")
    m = fio.Muxer(tmp_path / "bad.flac")
    enc = m.add_encode_stream(cfg, encoder="flac")
    with m.open():
        with pytest.raises(ValueError, match="keeps 24 bits"):
            enc.encode(fio.create_reference_audio_frame(full, "s32", 44100))
    # 24-bit audio held in s32 (the low byte zero, as FFmpeg decodes it)
    # round-trips exactly.
    path = tmp_path / "ok.flac"
    m = fio.Muxer(path)
    enc = m.add_encode_stream(cfg, encoder="flac")
    samples = full & ~0xFF
    with m.open():
        for p in (enc.encode(fio.create_reference_audio_frame(samples, "s32", 44100)), enc.flush()):
            if p is not None:
                m.write(0, p)
    raw = subprocess.run(
        ["ffmpeg", "-v", "error", "-i", str(path), "-f", "s32le", "-"], check=True, capture_output=True
    ).stdout
    np.testing.assert_array_equal(np.frombuffer(raw, np.int32), samples.ravel())


def test_empty_arrays_and_rates_past_32_bits_are_value_errors():
    # They raised TypeError (a memoryview cast) and RuntimeError (bad_cast).
    with pytest.raises(ValueError, match="with samples"):
        fio.encode_image(np.zeros((0, 8, 3), np.uint8), format="png")
    with pytest.raises(ValueError, match="with samples"):
        fio.create_reference_audio_frame(np.zeros((2, 0), np.float32), "fltp", 8000)
    with pytest.raises(ValueError, match="32 bits"):
        fio.video_encode_config(height=H, width=W, frame_rate=(1, 2**40))


def test_an_image_of_the_wrong_shape_for_its_pix_fmt_is_named_with_its_shape():
    # (8, 8, 3) as gray is 8 images of 8x3: the message says what one is.
    with pytest.raises(ValueError, match=r'pix_fmt "gray" is \(H, W\) or \(H, W, 1\), got shape \(8, 8, 3\)'):
        fio.encode_image(np.zeros((8, 8, 3), np.uint8), format="png", pix_fmt="gray")
    with pytest.raises(ValueError, match=r'pix_fmt "rgb24" is one frame.*got shape \(2, 8, 8, 3\)'):
        fio.encode_image(np.zeros((2, 8, 8, 3), np.uint8), format="png")


def test_out_of_range_quality_compression_and_sample_rate_are_value_errors(tmp_path):
    # Each was taken as "unset" (the encoder's default, or its first rate,
    # to which the audio was silently resampled) or passed on unchecked.
    from feedline.io import ops

    img = _video(1)[0]
    for kwargs in ({"quality": -5}, {"quality": -1}):
        with pytest.raises(ValueError, match="quality"):
            fio.encode_image(img, format="jpeg", **kwargs)
    with pytest.raises(ValueError, match="quality"):
        ops.encode_image(format="jpeg", quality=-1)
    with pytest.raises(ValueError, match="quality 101 is out of range"):
        fio.encode_image(img, format="webp", quality=101)
    for fmt, level in (("png", -2), ("png", 10), ("webp", 7)):
        with pytest.raises(ValueError, match=f"compression_level {level} is out of range"):
            fio.encode_image(img, format=fmt, compression_level=level)
    for rate in (0, -5):
        with pytest.raises(ValueError, match="sample_rate must be positive"):
            fio.audio_encode_config(num_channels=2, sample_rate=rate)
    # The native check, for a config made without the Python wrapper.
    cfg = fio.audio_encode_config(num_channels=2, sample_rate=48000)
    cfg.sample_rate = -5
    with pytest.raises(ValueError, match="sample_rate must be positive; got -5"):
        fio.Muxer(tmp_path / "n.m4a").add_encode_stream(cfg)
    # Unset still means the defaults.
    assert bytes(fio.encode_image(img, format="png", compression_level=-1))[:4] == b"\x89PNG"
    assert fio.audio_encode_config(num_channels=2, sample_rate=None).sample_rate == 0


def test_remux_keeps_the_source_tag_where_the_format_reads_it_alike(tmp_path, ffmpeg):
    # H.264 from MP4 into AVI: with the tag cleared, AVI chose its own "H264",
    # which claims Annex B, and refused every packet ("no startcode found");
    # the CLI's stream copy keeps "avc1", as this now does.
    src = tmp_path / "src.mp4"
    _write_video(src, _video(10), encoder="libx264")
    packets = fio.demux_video(src)
    out = tmp_path / "out.avi"
    m = fio.Muxer(out)
    m.add_remux_stream(packets.codec)
    with m.open():
        m.write(0, packets)
    stream = _probe(out)["streams"][0]
    assert (stream["codec_name"], stream["codec_tag_string"], int(stream["nb_read_frames"])) == ("h264", "avc1", 10)
    subprocess.run(["ffmpeg", "-v", "error", "-xerror", "-i", str(out), "-f", "null", "-"], check=True)
