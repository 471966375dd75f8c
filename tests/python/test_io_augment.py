"""Training augmentation at decode time: random resized crop and flip.

The crop boxes are checked against torchvision's RandomResizedCrop rule
(written out below from its documented algorithm, since torchvision's PyPI
builds do not import beside the CPU torch used here), the pixels against
Pillow's crop() + resize(BILINEAR), and the draws for reproducibility across
thread counts and output orders.
"""

import hashlib
import io
import math

import numpy as np
import pytest
from conftest import tar_bytes

import feedline
import feedline.io as fio
from feedline.io import ops
from feedline.pipeline import PipelineBuilder

PIL = pytest.importorskip("PIL.Image")
skdata = pytest.importorskip("skimage.data")
stats = pytest.importorskip("scipy.stats")

PHOTOS = ["astronaut", "coffee", "chelsea", "rocket"]  # 512x512, 600x400, 451x300, 427x640
SCALE = (0.08, 1.0)
RATIO = (3.0 / 4.0, 4.0 / 3.0)


def encode(array, fmt="JPEG", **kw):
    b = io.BytesIO()
    PIL.fromarray(array).save(b, format=fmt, **kw)
    return b.getvalue()


@pytest.fixture(scope="module")
def jpegs():
    return {name: encode(getattr(skdata, name)(), quality=90) for name in PHOTOS}


def torchvision_get_params(width, height, scale, ratio, uniform):
    """RandomResizedCrop.get_params, with each random draw taken from
    ``uniform()``: torch's uniform_(a, b) is a + (b - a) * u, and
    randint(0, n) is floor(u * n)."""
    area = height * width
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target_area = area * (scale[0] + (scale[1] - scale[0]) * uniform())
        aspect_ratio = math.exp(log_ratio[0] + (log_ratio[1] - log_ratio[0]) * uniform())
        w = int(round(math.sqrt(target_area * aspect_ratio)))
        h = int(round(math.sqrt(target_area / aspect_ratio)))
        if 0 < w <= width and 0 < h <= height:
            i = int(uniform() * (height - h + 1))
            j = int(uniform() * (width - w + 1))
            return i, j, h, w
    in_ratio = float(width) / float(height)
    if in_ratio < min(ratio):
        w = width
        h = int(round(w / min(ratio)))
    elif in_ratio > max(ratio):
        h = height
        w = int(round(h * max(ratio)))
    else:
        w = width
        h = height
    return (height - h) // 2, (width - w) // 2, h, w


def test_box_is_torchvisions_function_of_the_same_draws():
    rng = np.random.default_rng(0)
    cases = 0
    for width, height in [(500, 375), (224, 224), (1000, 90), (80, 900), (3, 2)]:
        for scale, ratio in [(SCALE, RATIO), ((0.5, 2.0), (0.2, 5.0)), ((1.5, 3.0), RATIO)]:
            for _ in range(200):
                draws = list(rng.random(40))
                it = iter(draws)
                want = torchvision_get_params(width, height, scale, ratio, it.__next__)
                got = fio.random_resized_crop_box(width, height, scale=scale, ratio=ratio, draws=draws)
                assert got == want, (width, height, scale, ratio)
                cases += 1
    assert cases == 3000


def test_seeded_boxes_follow_torchvisions_distribution():
    """Boxes from feedline's seeded draws against boxes from the reference
    rule fed NumPy's uniform numbers: same distribution of area share, log
    aspect ratio and position (two-sample Kolmogorov-Smirnov)."""
    width, height = 500, 375
    n = 4000
    ours = np.array([fio.random_resized_crop_box(width, height, seed=1, epoch=0, index=i) for i in range(n)])
    rng = np.random.default_rng(1)
    ref = np.array([torchvision_get_params(width, height, SCALE, RATIO, rng.random) for _ in range(n)])

    def features(boxes):
        top, left, h, w = boxes.T.astype(float)
        return {
            "area": h * w / (width * height),
            "log_ratio": np.log(w / h),
            "top": top / np.maximum(height - h + 1, 1),
            "left": left / np.maximum(width - w + 1, 1),
        }

    a, b = features(ours), features(ref)
    for key in a:
        result = stats.ks_2samp(a[key], b[key])
        assert result.pvalue > 1e-3, (key, result)
    # And they are not a degenerate distribution either.
    assert 0.35 < a["area"].mean() < 0.7 and len(set(map(tuple, ours))) > n * 0.9


@pytest.mark.parametrize("name", PHOTOS)
def test_pixels_equal_pillow_crop_then_resize(jpegs, name):
    img = PIL.open(io.BytesIO(jpegs[name])).convert("RGB")
    width, height = img.size
    for index in range(6):
        top, left, h, w = fio.random_resized_crop_box(width, height, seed=7, epoch=2, index=index)
        ref = np.asarray(img.crop((left, top, left + w, top + h)).resize((224, 160), PIL.BILINEAR))
        got = fio.to_numpy(
            fio.decode_image(
                jpegs[name], random_resized_crop=(224, 160), seed=7, epoch=2, index=index, dct_scaling=False
            )
        )
        assert got.shape == (160, 224, 3)
        assert np.abs(got.astype(int) - ref).max() <= 1, (name, index)
        flipped = fio.to_numpy(
            fio.decode_image(
                jpegs[name], random_resized_crop=(224, 160), hflip=1.0, seed=7, epoch=2, index=index, dct_scaling=False
            )
        )
        assert np.array_equal(flipped, got[:, ::-1])
        # At a DCT scale: the same picture, within the resize's tolerance.
        scaled = fio.to_numpy(
            fio.decode_image(jpegs[name], random_resized_crop=(224, 160), seed=7, epoch=2, index=index)
        )
        assert np.abs(scaled.astype(int) - ref).mean() < 3.0


def test_float_chw_output_is_normalised(jpegs):
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    u8 = fio.to_numpy(fio.decode_image(jpegs["coffee"], random_resized_crop=64, seed=3, index=5))
    f = fio.to_numpy(
        fio.decode_image(
            jpegs["coffee"], random_resized_crop=64, seed=3, index=5, layout="CHW", dtype="float32", mean=mean, std=std
        )
    )
    assert f.shape == (3, 64, 64) and f.dtype == np.float32
    want = (u8.transpose(2, 0, 1) / 255.0 - np.array(mean)[:, None, None]) / np.array(std)[:, None, None]
    assert np.abs(f - want).max() < 2.5 / 255 / 0.224


def test_seed_epoch_and_index_decide_the_crop(jpegs):
    def crop(**kw):
        return fio.to_numpy(fio.decode_image(jpegs["astronaut"], random_resized_crop=32, hflip=0.5, **kw)).tobytes()

    a = crop(seed=1, epoch=0, index=0)
    assert a == crop(seed=1, epoch=0, index=0)
    assert len({a, crop(seed=2, epoch=0, index=0), crop(seed=1, epoch=1, index=0), crop(seed=1, epoch=0, index=1)}) == 4
    # Unseeded: fresh draws on every call.
    assert len({crop(name="x") for _ in range(5)}) > 1
    with pytest.raises(ValueError, match="index"):
        fio.decode_image(jpegs["astronaut"], random_resized_crop=32, seed=1)


def checksums(batches):
    """The sorted digests of every image in a list of batches (or images)."""
    out = []
    for b in batches:
        a = fio.to_numpy(b)
        for img in a.reshape((-1,) + a.shape[-3:]):
            out.append(hashlib.sha1(img.tobytes()).hexdigest())
    return sorted(out)


@pytest.fixture(scope="module")
def image_dir(tmp_path_factory, jpegs):
    d = tmp_path_factory.mktemp("augment")
    paths = []
    for i in range(24):
        p = d / f"{i:03d}.jpg"
        p.write_bytes(jpegs[PHOTOS[i % 4]])
        paths.append(str(p))
    return paths


@pytest.mark.parametrize("batched", [False, True])
def test_same_seed_same_images_on_any_thread_count_and_order(image_dir, batched):
    kw = dict(random_resized_crop=(48, 40), hflip=0.5, seed=11, epoch=3, layout="CHW")
    results = []
    for threads in (1, 2, 8):
        for order in ("input", "completion"):
            b = PipelineBuilder().add_source(image_dir).pipe(ops.read_file(), concurrency=threads, output_order=order)
            if batched:
                b = b.aggregate(5).pipe(ops.decode_batch(**kw), concurrency=threads, output_order=order)
            else:
                b = b.pipe(ops.decode_image(**kw), concurrency=threads, output_order=order)
            p = b.add_sink(4).build(num_threads=threads)
            with p.auto_stop():
                results.append(checksums(list(p)))
    assert all(r == results[0] for r in results)
    assert len(results[0]) == 24 and len(set(results[0])) == 24
    # The same images, decoded one by one, keyed by their paths.
    one_by_one = [fio.load_image(path, **kw) for path in image_dir]
    assert checksums(one_by_one) == results[0]
    # Another epoch gives other crops.
    p = PipelineBuilder().add_source(image_dir).pipe(ops.read_file()).pipe(ops.decode_image(**{**kw, "epoch": 4}))
    with (p := p.add_sink(4).build(num_threads=2)).auto_stop():
        assert not set(checksums(list(p))) & set(results[0])


@pytest.mark.parametrize("batched", [False, True])
def test_bytes_without_a_name_are_keyed_by_their_contents_not_their_length(batched):
    # Four PNGs of one length (stored, not compressed) that differ in one
    # blue value: red is x and green is y, so the crop shows in the output.
    y, x = np.mgrid[0:256, 0:256]
    base = np.stack([x, y, np.zeros_like(x)], axis=-1).astype(np.uint8)
    pngs = []
    for i in range(4):
        img = base.copy()
        img[0, 0, 2] = i + 1
        pngs.append(encode(img, "PNG", compress_level=0))
    assert len({len(p) for p in pngs}) == 1 and len(set(pngs)) == 4
    kw = dict(random_resized_crop=(32, 32), seed=7)

    def crops(srcs):
        b = PipelineBuilder().add_source(srcs)
        b = b.aggregate(len(srcs)).pipe(ops.decode_batch(**kw)) if batched else b.pipe(ops.decode_image(**kw))
        with (p := b.add_sink(4).build(num_threads=2, max_failures=0)).auto_stop():
            out = [fio.to_numpy(x) for x in p]
        rows = np.concatenate([a.reshape(-1, 32, 32, 3) for a in out])
        return [r[..., :2].tobytes() for r in rows]  # red and green: the box

    boxes = crops(pngs)
    # Keyed by "<N bytes>", all four drew one box.
    assert len(set(boxes)) == 4
    # Keyed by the bytes: the same box for an image wherever it comes.
    assert crops(pngs[::-1]) == boxes[::-1]
    # And a function of the seed.
    kw["seed"] = 8
    assert not set(crops(pngs)) & set(boxes)


def test_archive_members_are_keyed_and_named_by_archive_and_member(tmp_path):
    # Shards whose members share names, as WebDataset shards often do.
    y, x = np.mgrid[0:256, 0:256]
    img = np.stack([x, y, np.zeros_like(x)], axis=-1).astype(np.uint8)
    other = img.copy()
    other[0, 0, 2] = 1
    png, png2 = encode(img, "PNG", compress_level=0), encode(other, "PNG", compress_level=0)
    kw = dict(random_resized_crop=(32, 32), seed=7)

    def crops(shards, **build):
        b = PipelineBuilder().add_source(shards)
        if isinstance(shards[0], str):
            b = b.pipe(ops.read_file())
        b = b.pipe(ops.tar_members()).pipe(ops.decode_image(**kw))
        with (p := b.add_sink(4).build(num_threads=1, **build)).auto_stop():
            return [fio.to_numpy(a)[..., :2].tobytes() for a in p]  # the box

    paths = []
    for shard in ("a", "b"):
        paths.append(str(tmp_path / f"{shard}.tar"))
        (tmp_path / f"{shard}.tar").write_bytes(tar_bytes([("0.png", png)]))
    # One image under one member name in two shards: two keys, two crops.
    a, b = crops(paths)
    assert a != b
    assert crops(paths[::-1]) == [b, a]
    # Shards given as bytes have no name: members are keyed by contents.
    same = crops([tar_bytes([("0.png", png)]), tar_bytes([("0.png", png)])])
    assert same[0] == same[1]
    differ = crops([tar_bytes([("0.png", png)]), tar_bytes([("0.png", png2)])])
    assert differ[0] != differ[1]
    # A bad member's error names its shard.
    (tmp_path / "c.tar").write_bytes(tar_bytes([("7.jpg", b"not an image")]))
    with pytest.raises(feedline.PipelineFailure, match=r"c\.tar:7\.jpg"):
        crops([str(tmp_path / "c.tar")], max_failures=0)


def test_load_image_batch_with_indices(jpegs):
    srcs = [jpegs[n] for n in PHOTOS]
    kw = dict(width=None, height=None, random_resized_crop=(40, 30), seed=5)
    a = fio.to_numpy(fio.load_image_batch(srcs, indices=[10, 11, 12, 13], **kw))
    assert a.shape == (4, 30, 40, 3)
    b = fio.to_numpy(fio.load_image_batch(srcs[::-1], indices=[13, 12, 11, 10], **kw))
    assert np.array_equal(a, b[::-1])
    for i, data in enumerate(srcs):
        one = fio.to_numpy(fio.decode_image(data, random_resized_crop=(40, 30), seed=5, index=10 + i))
        assert np.array_equal(a[i], one)
    with pytest.raises(ValueError, match="indices"):
        fio.load_image_batch(srcs, **kw)
    with pytest.raises(ValueError, match="4 sources"):
        fio.load_image_batch(srcs, indices=[1], **kw)


def test_eval_transform_decodes_only_the_rows_it_needs(jpegs):
    """Resize(256) + CenterCrop(224) decodes part of the JPEG: damage in the
    rows the crop does not use is still found (the file is entropy-decoded
    whole), and the pixels equal those of the full decode then crop."""
    data = jpegs["rocket"]  # 427 x 640: the crop keeps the middle rows
    full = fio.to_numpy(fio.decode_image(data, resize_shorter=256, dct_scaling=False))
    crop = fio.to_numpy(fio.decode_image(data, resize_shorter=256, crop=224, dct_scaling=False))
    top, left = int(round((full.shape[0] - 224) / 2.0)), int(round((full.shape[1] - 224) / 2.0))
    assert np.array_equal(crop, full[top : top + 224, left : left + 224])


@pytest.mark.parametrize("subsampling", [0, 2])  # 4:4:4 and 4:2:0
def test_partial_decode_of_a_progressive_jpeg_with_missing_scans_equals_the_whole(subsampling):
    """A progressive file whose scans stop early (EOI after the first few)
    is smoothed by libjpeg-turbo from the DC values of blocks up to two
    away; at a cropped decode's first column it used to take copies of that
    column for the blocks left of it, so that more than half of these crops
    differed from the same crop of the whole decode."""
    whole_file = encode(skdata.astronaut()[::3, ::3][:120, :160], quality=90, progressive=True, subsampling=subsampling)
    scans = [i for i in range(len(whole_file) - 1) if whole_file[i : i + 2] == b"\xff\xda"]
    assert len(scans) > 4
    for keep in (1, 3, len(scans) - 1):
        data = whole_file[: scans[keep]] + b"\xff\xd9"
        for dct_scaling in (False, True):
            kw = dict(random_resized_crop=16, crop_scale=(0.01, 1.0), crop_ratio=(0.2, 5.0), dct_scaling=dct_scaling)
            for index in range(40):
                cut = fio.to_numpy(fio.decode_image(data, seed=1, index=index, **kw))
                whole = fio.to_numpy(fio.decode_image(data, seed=1, index=index, partial_decode=False, **kw))
                assert np.array_equal(cut, whole), (keep, dct_scaling, index)


@pytest.mark.parametrize("mode", ["L", "CMYK", "progressive", "png"])
def test_every_kind_of_image_takes_the_crop(jpegs, mode):
    rgb = skdata.chelsea()
    if mode == "L":
        data = encode(np.asarray(PIL.fromarray(rgb).convert("L")))
    elif mode == "CMYK":
        b = io.BytesIO()
        PIL.fromarray(rgb).convert("CMYK").save(b, format="JPEG", quality=95)
        data = b.getvalue()
    elif mode == "progressive":
        data = encode(rgb, quality=90, progressive=True, subsampling=1)
    else:
        data = encode(rgb, "PNG")
    img = PIL.open(io.BytesIO(data)).convert("RGB")
    for index in range(4):
        top, left, h, w = fio.random_resized_crop_box(*img.size, seed=1, index=index)
        ref = np.asarray(img.crop((left, top, left + w, top + h)).resize((64, 48), PIL.BILINEAR))
        got = fio.to_numpy(fio.decode_image(data, random_resized_crop=(64, 48), seed=1, index=index, dct_scaling=False))
        assert np.abs(got.astype(int) - ref).max() <= (2 if mode == "CMYK" else 1), (mode, index)


@pytest.mark.parametrize(
    "data, match",
    [
        (b"", "empty"),
        (b"\xff\xd8\xff\xe0garbage", "JPEG"),
        (b"not an image", "not a JPEG or PNG"),
    ],
)
def test_bad_input_is_a_decode_error_naming_it(data, match):
    with pytest.raises((feedline.DecodeError, feedline.UnsupportedFormat), match=match) as info:
        fio.decode_image(data, name="sample.jpg", random_resized_crop=32, seed=0)
    assert "sample.jpg" in str(info.value)


def test_truncated_and_huge_images_are_refused(jpegs):
    data = jpegs["coffee"]
    with pytest.raises(feedline.DecodeError, match="cut.jpg"):
        fio.decode_image(data[: len(data) // 2], name="cut.jpg", random_resized_crop=32, seed=0)
    with pytest.raises(feedline.DecodeError, match="limit"):
        fio.decode_image(data, name="big.jpg", random_resized_crop=16, max_pixels=1000)


@pytest.mark.parametrize("name", ["png", "webp"])
def test_an_output_past_max_pixels_is_a_value_error_not_an_allocation(tmp_path, ffmpeg, name):
    # They raised MemoryError (std::bad_alloc) trying to allocate the
    # output; a size just small enough to allocate took tens of GB.
    path = tmp_path / f"small.{name}"
    ffmpeg("-f", "lavfi", "-i", "testsrc=size=30x20", "-frames:v", 1, path)
    data = path.read_bytes()
    for kwargs, what in [
        ({"width": 100000, "height": 100000}, "width x height"),
        ({"random_resized_crop": 100000}, "random_resized_crop"),
        ({"crop": (20000, 20000)}, "crop"),
        ({"resize_shorter": 10**6}, "resize_shorter=1000000 of a 30x20 image"),
        ({"width": 300, "height": 200, "max_pixels": 50000}, "width x height"),
    ]:
        with pytest.raises(ValueError, match=f"{what} gives an image of .* more than max_pixels"):
            fio.load_image(data, **kwargs)  # PNG: the native decoder; WebP: FFmpeg
    # Within the limit, the same options decode.
    assert fio.to_numpy(fio.load_image(data, resize_shorter=60)).shape == (60, 90, 3)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"random_resized_crop": True},
        {"random_resized_crop": (True, 4)},
        {"width": True, "height": True},
        {"crop": 4.5},
        {"resize_shorter": 2.0},
    ],
)
def test_sizes_must_be_ints_not_bools_or_floats(kwargs):
    # random_resized_crop=True and width=True were taken as 1: a 1x1 image.
    with pytest.raises(ValueError, match="must be an int"):
        ops.decode_image(**kwargs)


def test_option_validation():
    with pytest.raises(ValueError, match="random_resized_crop"):
        fio.decode_image(b"x", random_resized_crop=0)
    with pytest.raises(ValueError, match="crop_scale"):
        ops.decode_image(random_resized_crop=8, crop_scale=(0.1,))
    with pytest.raises(ValueError, match="random_resized_crop sets the output size"):
        ops.decode_image(random_resized_crop=8, resize_shorter=10)
    with pytest.raises(ValueError, match="scale"):
        ops.decode_image(random_resized_crop=8, crop_scale=(0.9, 0.1))
    with pytest.raises(ValueError, match="ratio"):
        ops.decode_image(random_resized_crop=8, crop_ratio=(0.0, 1.0))
    with pytest.raises(ValueError, match="flip"):
        ops.decode_image(hflip=2.0)
    with pytest.raises(ValueError, match="seed"):
        ops.decode_image(seed=-1)


@pytest.mark.parametrize("fmt", ["BMP", "TIFF", "WEBP"])
def test_formats_ffmpeg_decodes_are_decoded_whole_then_cropped(tmp_path, fmt):
    rgb = skdata.chelsea()
    kw = {"lossless": True} if fmt == "WEBP" else {}
    other = tmp_path / f"cat.{fmt.lower()}"
    other.write_bytes(encode(rgb, fmt, **kw))
    png = tmp_path / "cat.png"
    png.write_bytes(encode(rgb, "PNG"))
    opts = dict(random_resized_crop=(64, 48), hflip=0.5, seed=2, layout="CHW", dtype="float32")
    for index in range(3):
        got = fio.to_numpy(fio.load_image(other, index=index, **opts))
        want = fio.to_numpy(fio.load_image(png, index=index, **opts))
        assert got.shape == (3, 48, 64)
        assert np.array_equal(got, want), (fmt, index)


def test_transform_image_takes_arrays_and_buffers():
    rgb = skdata.astronaut()
    png = encode(rgb, "PNG")
    opts = dict(resize_shorter=100, crop=80, pix_fmt="bgr24")
    want = fio.to_numpy(fio.decode_image(png, **opts))
    assert np.array_equal(fio.to_numpy(fio.transform_image(rgb, **opts)), want)
    # A strided view is made contiguous first; a Buffer is read in place.
    assert np.array_equal(fio.to_numpy(fio.transform_image(np.asfortranarray(rgb), **opts)), want)
    assert np.array_equal(fio.to_numpy(fio.transform_image(fio.decode_image(png), **opts)), want)
    grey = np.asarray(PIL.fromarray(rgb).convert("L"))
    assert fio.transform_image(grey, pix_fmt="gray").shape == (512, 512, 1)
    with pytest.raises(ValueError, match="uint8"):
        fio.transform_image(rgb.astype(np.float32))
    with pytest.raises(ValueError, match="thing"):
        fio.transform_image(np.zeros((4, 4, 4), np.uint8), name="thing")


# -- prepare_jpeg: crops decoded from only the restart intervals they cover --


@pytest.fixture(scope="module")
def prepared(jpegs):
    return {name: fio.prepare_jpeg(data, name=name) for name, data in jpegs.items()}


def _pillow_pixels(data):
    return np.asarray(PIL.open(io.BytesIO(data)))


def test_prepared_jpegs_give_any_decoder_the_same_pixels(jpegs, prepared):
    for name in PHOTOS:
        src, out = jpegs[name], prepared[name]
        assert out[:2] == b"\xff\xd8" and b"feedline-rst\x00\x01" in out
        assert b"\xff\xd0" in out and b"\xff\xdd" in out  # RST0 and DRI
        assert len(out) < 1.05 * len(src)
        assert np.array_equal(_pillow_pixels(out), _pillow_pixels(src)), name
        assert np.array_equal(fio.to_numpy(fio.decode_image(out)), fio.to_numpy(fio.decode_image(src))), name
        assert fio.prepare_jpeg(out) == out


def _sources(kind):
    rgb = skdata.chelsea()
    if kind == "L":
        return encode(np.asarray(PIL.fromarray(rgb).convert("L")), quality=90)
    if kind == "CMYK":
        b = io.BytesIO()
        PIL.fromarray(rgb).convert("CMYK").save(b, format="JPEG", quality=95)
        return b.getvalue()
    if kind == "progressive":
        return encode(rgb, quality=90, progressive=True, subsampling=1)
    return encode(rgb, quality=85, subsampling=0)  # 4:4:4


@pytest.mark.parametrize("kind", ["photos", "L", "CMYK", "progressive", "444"])
def test_crops_of_prepared_jpegs_equal_those_of_the_source(tmp_path, jpegs, kind):
    datas = [jpegs[n] for n in PHOTOS] * 3 if kind == "photos" else [_sources(kind)] * 8
    src_paths, prep_paths = [], []
    for i, data in enumerate(datas):
        (tmp_path / f"s{i}.jpg").write_bytes(data)
        (tmp_path / f"p{i}.jpg").write_bytes(fio.prepare_jpeg(data))
        src_paths.append(str(tmp_path / f"s{i}.jpg"))
        prep_paths.append(str(tmp_path / f"p{i}.jpg"))
    norm = dict(layout="CHW", dtype="float32", mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    transforms = [
        dict(width=None, height=None, random_resized_crop=64, hflip=0.5, seed=3, epoch=1, **norm),
        dict(width=None, height=None, random_resized_crop=(48, 40), seed=4, dct_scaling=False),
        dict(width=None, height=None, resize_shorter=128, crop=112, **norm),
    ]
    indices = list(range(len(datas)))
    for kw in transforms:
        a = fio.to_numpy(fio.load_image_batch(src_paths, indices=indices, **kw))
        b = fio.to_numpy(fio.load_image_batch(prep_paths, indices=indices, **kw))
        assert np.array_equal(a, b), kw


def _flippable_byte_near_the_end(data):
    """An entropy-coded byte in the last restart interval whose low bit can
    flip without making or breaking a marker."""
    for i in range(len(data) - 8, 0, -1):
        if data[i] not in (0xFE, 0xFF) and data[i - 1] != 0xFF:
            return i
    raise AssertionError("no such byte")


def test_damage_to_a_prepared_jpeg_is_an_error_outside_the_crop_too(jpegs, prepared):
    data = bytearray(prepared["astronaut"])
    data[_flippable_byte_near_the_end(data)] ^= 0x01  # the bottom right corner
    for index in range(6):
        with pytest.raises(feedline.DecodeError, match="damaged.jpg.*CRC-32"):
            fio.decode_image(bytes(data), name="damaged.jpg", random_resized_crop=64, seed=0, index=index)
    with pytest.raises(feedline.DecodeError, match="damaged.jpg.*CRC-32"):
        fio.decode_image(bytes(data), name="damaged.jpg")
    truncated = prepared["astronaut"][: len(data) * 2 // 3]
    for index in range(3):
        with pytest.raises(feedline.DecodeError, match="cut.jpg"):
            fio.decode_image(truncated, name="cut.jpg", random_resized_crop=64, seed=0, index=index)
    with pytest.raises(feedline.UnsupportedFormat, match="x.png"):
        fio.prepare_jpeg(encode(skdata.chelsea(), "PNG"), name="x.png")
    with pytest.raises(feedline.DecodeError, match="h.jpg"):
        fio.prepare_jpeg(jpegs["coffee"][:300], name="h.jpg")
    with pytest.raises(feedline.DecodeError, match="big.jpg: image of 600 x 400 pixels .* limit of 1000"):
        fio.prepare_jpeg(jpegs["coffee"], name="big.jpg", max_pixels=1000)
