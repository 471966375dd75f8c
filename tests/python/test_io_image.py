"""feedline.io images: pixels against Pillow, geometry, formats, batches,
Buffer lifetime through NumPy and DLPack, native ops, and bad input.

The photographs are scikit-image's sample images, encoded with Pillow.
"""

import gc
import io
import logging

import numpy as np
import pytest

import feedline
import feedline.io as fio
from feedline.io import ops
from feedline.pipeline import PipelineBuilder, PipelineFailure

PIL = pytest.importorskip("PIL.Image")
skdata = pytest.importorskip("skimage.data")

PHOTOS = ["astronaut", "coffee", "chelsea", "rocket"]  # 512x512, 600x400, 451x300, 427x640


def encode(array, fmt="JPEG", **kw):
    b = io.BytesIO()
    PIL.fromarray(array).save(b, format=fmt, **kw)
    return b.getvalue()


@pytest.fixture(scope="module")
def photos():
    return {name: getattr(skdata, name)() for name in PHOTOS}


@pytest.fixture(scope="module")
def jpegs(photos):
    return {name: encode(a, quality=90) for name, a in photos.items()}


def pil_resize_crop(data, shorter, crop):
    """torchvision's Resize(shorter) + CenterCrop(crop) on a PIL image."""
    img = PIL.open(io.BytesIO(data)).convert("RGB")
    w, h = img.size
    nw, nh = (shorter, int(shorter * h / w)) if w <= h else (int(shorter * w / h), shorter)
    img = img.resize((nw, nh), PIL.BILINEAR)
    left, top = int(round((nw - crop) / 2.0)), int(round((nh - crop) / 2.0))
    return np.asarray(img.crop((left, top, left + crop, top + crop)))


@pytest.mark.parametrize("name", PHOTOS)
def test_full_size_jpeg_matches_pillow_exactly(jpegs, name):
    ref = np.asarray(PIL.open(io.BytesIO(jpegs[name])).convert("RGB"))
    got = fio.to_numpy(fio.decode_image(jpegs[name]))
    assert got.shape == ref.shape and got.dtype == np.uint8
    assert np.array_equal(got, ref)


@pytest.mark.parametrize("name", PHOTOS)
def test_resize_and_crop_match_pillow(jpegs, name):
    ref = pil_resize_crop(jpegs[name], 256, 224).astype(int)
    # Without DCT scaling: the same filter as Pillow's BILINEAR, within 1 level.
    exact = np.asarray(fio.decode_image(jpegs[name], resize_shorter=256, crop=224, dct_scaling=False))
    assert exact.shape == (224, 224, 3)
    assert np.abs(exact.astype(int) - ref).max() <= 1
    # With DCT scaling (the default), a different but good downscale.
    fast = np.asarray(fio.decode_image(jpegs[name], resize_shorter=256, crop=224)).astype(int)
    mse = np.mean((fast - ref) ** 2)
    psnr = 10 * np.log10(255**2 / max(mse, 1e-9))
    assert psnr > 28, psnr
    assert np.abs(fast - ref).mean() < 3


def test_png_and_gray_bgr_chw(photos):
    arr = photos["coffee"]
    png = encode(arr, "PNG")
    assert np.array_equal(np.asarray(fio.decode_image(png)), arr)
    bgr = np.asarray(fio.decode_image(png, pix_fmt="bgr24", layout="CHW"))
    assert np.array_equal(bgr, arr[:, :, ::-1].transpose(2, 0, 1))
    gray = np.asarray(fio.decode_image(png, pix_fmt="gray"))
    ref = np.asarray(PIL.fromarray(arr).convert("L"))
    assert gray.shape == arr.shape[:2] + (1,)
    assert np.abs(gray[:, :, 0].astype(int) - ref.astype(int)).max() <= 1


@pytest.mark.parametrize("mode", ["RGB", "RGBA", "L"])
@pytest.mark.parametrize("writer", ["pillow", "pillow-optimize", "ffmpeg-none", "ffmpeg-paeth", "ffmpeg-mixed"])
def test_png_of_every_writer_and_filter_equals_pillows_decode(photos, mode, writer):
    # The direct PNG path (libdeflate + in-place unfiltering) against Pillow's
    # decoder, on files from two writers with each of their row filters.
    import subprocess

    arr = photos["chelsea"][:97, :131]
    src = PIL.fromarray(arr).convert(mode)
    if writer.startswith("pillow"):
        png = encode(np.asarray(src), "PNG", optimize=writer.endswith("optimize"))
    else:
        pix_fmt = {"RGB": "rgb24", "RGBA": "rgba", "L": "gray"}[mode]
        raw = np.asarray(src).tobytes()
        cmd = ["ffmpeg", "-v", "error", "-f", "rawvideo", "-pix_fmt", pix_fmt, "-s", "131x97", "-i", "-"]
        cmd += ["-c:v", "png", "-pred", writer.split("-")[1], "-frames:v", "1", "-f", "image2pipe", "-"]
        png = subprocess.run(cmd, input=raw, check=True, capture_output=True).stdout
    ref = PIL.open(io.BytesIO(png))
    assert ref.mode == mode
    rgb = np.asarray(ref.convert("RGB"))
    assert np.array_equal(np.asarray(fio.decode_image(png)), rgb)
    assert np.array_equal(np.asarray(fio.decode_image(png, pix_fmt="bgr24")), rgb[:, :, ::-1])
    if mode == "L":
        assert np.array_equal(np.asarray(fio.decode_image(png, pix_fmt="gray"))[:, :, 0], np.asarray(ref))


@pytest.mark.parametrize("kind", ["rgb48", "gray16", "gamma-1.0", "gamma-cHRM-iCCP-sBIT"])
def test_png_samples_are_decoded_as_stored_without_colour_management(photos, kind):
    # 16-bit files (from the ffmpeg CLI) give the high byte of each sample, and
    # colour chunks change no sample: as Pillow, OpenCV and FFmpeg decode. (A 16-bit
    # file without gAMA, or one tagged gAMA 1.0, used to come out converted to sRGB.)
    import struct
    import subprocess
    import zlib

    from PIL import PngImagePlugin

    arr = photos["chelsea"][:97, :131]
    if kind in ("rgb48", "gray16"):
        src = arr if kind == "rgb48" else np.asarray(PIL.fromarray(arr).convert("L"))
        low = np.random.default_rng(0).integers(0, 256, src.shape, dtype=np.uint16)
        raw = (src.astype(np.uint16) * 256 + low).astype(">u2").tobytes()
        cmd = ["ffmpeg", "-v", "error", "-f", "rawvideo", "-pix_fmt", kind + "be", "-s", "131x97", "-i", "-"]
        cmd += ["-c:v", "png", "-frames:v", "1", "-f", "image2pipe", "-"]
        png = subprocess.run(cmd, input=raw, check=True, capture_output=True).stdout
        assert png[24:26] == bytes([16, 2 if kind == "rgb48" else 0])  # bit depth, colour type
        if kind == "rgb48":
            assert np.array_equal(np.asarray(PIL.open(io.BytesIO(png)).convert("RGB")), arr)
            assert np.array_equal(np.asarray(fio.decode_image(png)), arr)
        else:
            assert np.array_equal(np.asarray(fio.decode_image(png, pix_fmt="gray"))[:, :, 0], src)
        return
    info = PngImagePlugin.PngInfo()
    info.add(b"gAMA", struct.pack(">I", 100000))
    if kind != "gamma-1.0":
        info.add(b"cHRM", struct.pack(">8I", 31270, 32900, 64000, 33000, 30000, 60000, 15000, 6000))
        info.add(b"iCCP", b"profile\0\0" + zlib.compress(b"\0" * 132))
        info.add(b"sBIT", bytes([5, 6, 5]))
    b = io.BytesIO()
    PIL.fromarray(arr).save(b, format="PNG", pnginfo=info)
    png = b.getvalue()
    assert b"gAMA" in png
    assert np.array_equal(np.asarray(PIL.open(io.BytesIO(png)).convert("RGB")), arr)
    assert np.array_equal(np.asarray(fio.decode_image(png)), arr)


def test_float32_is_normalised(jpegs):
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    u8 = np.asarray(fio.decode_image(jpegs["chelsea"], width=64, height=48)).astype(np.float32)
    f = np.asarray(fio.decode_image(jpegs["chelsea"], width=64, height=48, dtype="float32", mean=mean, std=std))
    assert f.dtype == np.float32
    # uint8 output rounds; float output does not: within half a level.
    assert np.abs(f - (u8 / 255 - mean) / std).max() < 0.6 / 255 / min(std)


def test_scale_modes_keep_or_ignore_the_aspect_ratio(photos):
    png = encode(photos["coffee"], "PNG")  # 600 x 400
    assert fio.decode_image(png, width=100, height=100).shape == (100, 100, 3)
    padded = np.asarray(fio.decode_image(png, width=100, height=100, scale_mode="pad"))
    assert padded[:16].max() == 0 and padded[-16:].max() == 0  # 100x67 centred
    assert padded[20:80].mean() > 20
    assert fio.decode_image(png, width=100, height=100, scale_mode="crop").shape == (100, 100, 3)


def test_load_image_and_batch_from_paths_and_bytes(tmp_path, jpegs):
    paths = []
    for name, data in jpegs.items():
        p = tmp_path / f"{name}.jpg"
        p.write_bytes(data)
        paths.append(p)
    one = fio.load_image(paths[1], resize_shorter=256, crop=224)
    batch = fio.load_image_batch(paths[:3] + [jpegs["rocket"]], width=224, height=224, scale_mode="crop")
    assert batch.shape == (4, 224, 224, 3)
    b = fio.to_numpy(batch)
    assert b.flags.c_contiguous
    single = np.asarray(fio.load_image(paths[0], width=224, height=224, scale_mode="crop"))
    assert np.array_equal(b[0], single)
    assert one.shape == (224, 224, 3)


def test_load_image_takes_bytes_like_sources_as_spdl_does(tmp_path, jpegs, ffmpeg):
    # A path, bytes, a memoryview, a bytearray and a uint8 array give one
    # image; so do they for a format only FFmpeg reads. (bytes raised
    # TypeError.)
    data = jpegs["rocket"]
    path = tmp_path / "rocket.jpg"
    path.write_bytes(data)
    want = np.asarray(fio.load_image(path, width=64, height=48))
    for src in (data, memoryview(data), bytearray(data), np.frombuffer(data, np.uint8)):
        np.testing.assert_array_equal(np.asarray(fio.load_image(src, width=64, height=48)), want)
    bmp = tmp_path / "t.bmp"
    ffmpeg("-f", "lavfi", "-i", "testsrc2=size=32x24", "-frames:v", "1", bmp)
    np.testing.assert_array_equal(np.asarray(fio.load_image(bmp.read_bytes())), np.asarray(fio.load_image(bmp)))
    with pytest.raises(feedline.DecodeError, match="^my.jpg: "):
        fio.load_image(b"not an image at all" * 8, name="my.jpg")
    with pytest.warns(UserWarning, match=r"load_image ignores these arguments: \['device_config'\]"):
        fio.load_image(data, device_config=object())


def test_load_image_batch_strictness(tmp_path, jpegs, caplog):
    good = jpegs["astronaut"]
    srcs = [good, b"not an image", good]
    with pytest.raises(feedline.DecodeError, match="Failed to load some images"):
        fio.load_image_batch(srcs, width=32, height=32)
    caplog.set_level(logging.ERROR)
    batch = fio.load_image_batch(srcs, width=32, height=32, strict=False)
    assert batch.shape == (2, 32, 32, 3)
    assert any("image 1 failed" in r.getMessage() for r in caplog.records)
    with pytest.raises(feedline.DecodeError, match="Failed to load all"):
        fio.load_image_batch([b"x", b"y"], width=32, height=32, strict=False)
    with pytest.raises(ValueError):
        fio.load_image_batch([], width=32, height=32)


def test_load_image_batch_reports_failures_in_input_order(jpegs, caplog):
    # Image 0 fails while decoding, image 2 already at its header: the
    # messages and the error still go 0, then 2.
    good = jpegs["astronaut"]
    srcs = [good[: len(good) // 2], good, b"not an image", good]
    caplog.set_level(logging.ERROR)
    with pytest.raises(feedline.DecodeError, match=r"\(2 of 4\): <source 0>: .*; <source 2>: not a JPEG"):
        fio.load_image_batch(srcs, width=32, height=32)
    failed = [r.getMessage() for r in caplog.records if "load_image_batch: image" in r.getMessage()]
    assert [m.split()[2] for m in failed] == ["0", "2"]


def test_numpy_view_keeps_the_buffer_alive(jpegs):
    arr = fio.to_numpy(fio.decode_image(jpegs["coffee"], width=32, height=32))
    gc.collect()
    ref = np.asarray(fio.decode_image(jpegs["coffee"], width=32, height=32))
    assert np.array_equal(arr, ref)  # the Buffer behind `arr` is still there
    assert arr.ctypes.data != ref.ctypes.data


def test_dlpack_export(jpegs):
    buf = fio.decode_image(jpegs["coffee"], width=16, height=8, layout="CHW", dtype="float32")
    assert buf.__dlpack_device__() == (1, 0)
    cap = buf.__dlpack__()
    assert type(cap).__name__ == "PyCapsule"
    torch = pytest.importorskip("torch")
    t = fio.to_torch(buf)
    assert tuple(t.shape) == (3, 8, 16) and t.dtype == torch.float32
    assert t.data_ptr() == np.asarray(buf).ctypes.data  # no copy
    del buf
    gc.collect()
    assert torch.isfinite(t).all()


def _dlpack_data(buf):
    """The data pointer of the DLTensor in ``buf.__dlpack__()``."""
    import ctypes

    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    capsule = buf.__dlpack__()  # alive while its tensor is read
    return ctypes.c_void_p.from_address(get(capsule, b"dltensor")).value


def test_dlpack_exports_a_read_only_buffer_as_a_copy():
    # DLPack's capsule cannot say read-only: torch got a writable tensor over
    # a bytes object (changed in place) or a read-only file mapping (a
    # segfault on the first write).
    from feedline._feedline_ext import io as _io

    data = bytes(range(8))
    view = _io.buffer_view(data, "uint8", [8])
    assert not view.writable
    assert _dlpack_data(view) != view.__array_interface__["data"][0]  # a copy
    shared = _io.buffer_view(bytearray(8), "uint8", [8])
    assert shared.writable
    assert _dlpack_data(shared) == shared.__array_interface__["data"][0]  # a view
    torch = pytest.importorskip("torch")
    t = torch.from_dlpack(view)
    t[0] = 99
    assert data == bytes(range(8)) and int(t[0]) == 99


def test_views_whose_shape_overflows_or_is_negative_are_refused():
    from feedline._feedline_ext import io as _io

    with pytest.raises(ValueError, match="another size"):
        _io.buffer_view(bytes(8), "float64", [2**61 + 1])  # 2^64 + 8 bytes: wrapped, 8
    with pytest.raises(ValueError, match="another size"):
        _io.buffer_view(bytes(8), "uint8", [-1, -8])


def test_convert_frames_refuses_none_in_a_list():
    with pytest.raises(ValueError, match="item 0 of the list is None"):
        fio.convert_frames([None])


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"", "empty"),
        (b"GIF89a....", "not a JPEG or PNG"),
        ("truncated-jpeg", "corrupt JPEG"),
        ("truncated-png", "PNG"),
    ],
)
def test_bad_input_raises_decode_error_naming_it(jpegs, photos, data, match):
    if data == "truncated-jpeg":
        data = jpegs["coffee"][: len(jpegs["coffee"]) // 2]
    elif data == "truncated-png":
        png = encode(photos["coffee"], "PNG")
        data = png[: len(png) // 2]
    with pytest.raises(feedline.DecodeError, match=match) as info:
        fio.decode_image(data, name="sample-7")
    assert "sample-7" in str(info.value)


def test_huge_dimensions_are_refused_before_decoding(jpegs):
    with pytest.raises(feedline.DecodeError, match="exceeds"):
        fio.decode_image(jpegs["coffee"], max_pixels=1000)


def test_missing_file_is_an_io_error(tmp_path):
    with pytest.raises(feedline.IoError, match="missing.jpg"):
        fio.load_image(tmp_path / "missing.jpg")


def test_native_pipeline_from_paths_to_batches(tmp_path, jpegs):
    paths = []
    for i in range(10):
        name = PHOTOS[i % 4]
        p = tmp_path / f"{i}.jpg"
        p.write_bytes(jpegs[name])
        paths.append(str(p))
    paths.append(str(tmp_path / "missing.jpg"))
    (tmp_path / "bad.jpg").write_bytes(b"\xff\xd8\xffgarbage")
    paths.append(str(tmp_path / "bad.jpg"))
    p = (
        PipelineBuilder()
        .add_source(paths)
        .pipe(ops.read_file(), concurrency=2)
        .pipe(ops.decode_image(resize_shorter=64, crop=56, layout="CHW"), concurrency=2)
        .aggregate(4)
        .pipe(ops.stack())
        .add_sink(3)
        .build(num_threads=2)
    )
    with p.auto_stop():
        batches = list(p)
    assert sorted(b.shape[0] for b in batches) == [2, 4, 4]
    assert all(b.shape[1:] == (3, 56, 56) for b in batches)
    s = p.stats()
    assert s.stages[1].failures == 1 and s.stages[2].failures == 1  # counted, named in the log
    # Failures are typed and name the input.
    p = PipelineBuilder().add_source([str(tmp_path / "bad.jpg")]).pipe(ops.read_file()).pipe(ops.decode_image())
    p = p.add_sink(1).build(num_threads=1, max_failures=0)
    with p.auto_stop(), pytest.raises(PipelineFailure) as info:
        list(p)
    cause = info.value.exceptions[0].__cause__
    assert type(cause) is feedline.DecodeError and "bad.jpg" in str(cause)


def test_decode_op_takes_python_bytes(jpegs):
    p = PipelineBuilder().add_source([jpegs["coffee"]]).pipe(ops.decode_image(width=8, height=8)).add_sink(1)
    with (p := p.build(num_threads=1)).auto_stop():
        (buf,) = list(p)
    assert isinstance(buf, fio.Buffer) and buf.shape == (8, 8, 3)


def test_image_option_validation():
    with pytest.raises(ValueError, match="both width and height"):
        fio.decode_image(b"", width=3)
    with pytest.raises(ValueError, match="pix_fmt"):
        ops.decode_image(pix_fmt="yuv")
    with pytest.raises(ValueError, match="mean and std"):
        ops.decode_image(mean=[0.5])


def test_decode_batch_decodes_straight_into_the_batch(tmp_path, jpegs, caplog):
    names = ["astronaut", "coffee", "chelsea", "rocket"] * 2
    srcs = [jpegs[n] for n in names]
    srcs[3] = b"\xff\xd8\xff broken"
    p = (
        PipelineBuilder()
        .add_source(srcs)
        .aggregate(4)
        .pipe(ops.decode_batch(resize_shorter=64, crop=56, layout="CHW"))
        .add_sink(3)
        .build(num_threads=1)
    )
    caplog.set_level(logging.WARNING, logger="feedline")
    with p.auto_stop():
        first, second = list(p)
    assert first.shape == (3, 3, 56, 56) and second.shape == (4, 3, 56, 56)
    # Each slot equals the single-image decode, in input order.
    want = np.asarray(fio.decode_image(jpegs["coffee"], resize_shorter=64, crop=56, layout="CHW"))
    assert np.array_equal(np.asarray(first)[1], want)
    assert any("decode_batch" in r.getMessage() and "invalid JPEG" in r.getMessage() for r in caplog.records)
    # A batch where nothing decodes is a failed call.
    p = PipelineBuilder().add_source([b"x", b"y"]).aggregate(2).pipe(ops.decode_batch(width=8, height=8))
    p = p.add_sink(1).build(num_threads=1, max_failures=0)
    with p.auto_stop(), pytest.raises(PipelineFailure) as info:
        list(p)
    assert type(info.value.exceptions[0].__cause__) is feedline.DecodeError
    with pytest.raises(ValueError, match="one output size"):
        ops.decode_batch(resize_shorter=64)


def test_batches_outlive_the_pipeline_that_made_them(jpegs):
    p = PipelineBuilder().add_source([jpegs["coffee"]] * 4).aggregate(4)
    p = p.pipe(ops.decode_batch(width=16, height=16, dtype="float32")).add_sink(1).build(num_threads=1)
    with p.auto_stop():
        (batch,) = list(p)
    array = fio.to_numpy(batch)
    want = np.asarray(fio.decode_image(jpegs["coffee"], width=16, height=16, dtype="float32"))
    del batch, p
    gc.collect()
    assert array.shape == (4, 16, 16, 3)
    assert all(np.array_equal(a, want) for a in array)


def test_unsupported_formats_raise_unsupported_format(tmp_path):
    assert issubclass(feedline.UnsupportedFormat, feedline.DecodeError)
    with pytest.raises(feedline.UnsupportedFormat, match="sample-8"):
        fio.decode_image(b"GIF89a....", name="sample-8")
    # A damaged JPEG is a DecodeError of another kind.
    with pytest.raises(feedline.DecodeError) as info:
        fio.decode_image(b"\xff\xd8\xff broken", name="sample-9")
    assert not isinstance(info.value, feedline.UnsupportedFormat)


def test_decode_batch_reports_python_elements_that_do_not_convert(jpegs, caplog):
    srcs = [jpegs["coffee"], "a-path-not-bytes", jpegs["rocket"], 42]
    p = PipelineBuilder().add_source(srcs).aggregate(4).pipe(ops.decode_batch(width=16, height=16))
    p = p.add_sink(1).build(num_threads=1)
    caplog.set_level(logging.WARNING, logger="feedline")
    with p.auto_stop():
        (batch,) = list(p)
    assert batch.shape == (2, 16, 16, 3)
    messages = [r.getMessage() for r in caplog.records if "decode_batch" in r.getMessage()]
    assert any("element 1" in m and "read_file" in m for m in messages), messages
    assert any("element 3" in m for m in messages), messages
    # A batch where no element converts is a failed call.
    p = PipelineBuilder().add_source(["x", "y"]).aggregate(2).pipe(ops.decode_batch(width=8, height=8))
    p = p.add_sink(1).build(num_threads=1, max_failures=0)
    with p.auto_stop(), pytest.raises(PipelineFailure) as info:
        list(p)
    assert isinstance(info.value.exceptions[0].__cause__, ValueError)
