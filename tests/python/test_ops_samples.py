"""Samples through native ops: a source of (path, label) tuples or dicts
reaches ``feedline.io.ops``, each op works on the sample's payload field and
gives back the sample in its shape, the rest carried untouched; batch ops
give the batch with the carried fields as columns, aligned row by row also
when an image in the middle fails.

Images are solid grey PNGs whose level encodes their label, so a decoded row
shows which label it must sit next to.
"""

import io
import sys
import tarfile
import time

import _feedline_testing as testing
import numpy as np
import pytest

import feedline
from feedline.io import ops
from feedline.pipeline import PipelineBuilder, PipelineFailure

PIL = pytest.importorskip("PIL.Image")


def png(level, w=12, h=9):
    buf = io.BytesIO()
    PIL.fromarray(np.full((h, w, 3), level, dtype=np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """(path, label) of 20 solid PNGs, level = 10 * label."""
    d = tmp_path_factory.mktemp("samples")
    out = []
    for label in range(20):
        p = d / f"{label}.png"
        p.write_bytes(png(10 * label))
        out.append((str(p), label))
    return out


def run(builder, num_threads=3, **kwargs):
    p = builder.build(num_threads=num_threads, **kwargs)
    with p.auto_stop():
        return list(p), p.stats()


def level(buf):
    return int(np.asarray(buf).reshape(-1)[0])


def test_tuples_keep_their_labels_through_read_and_decode(images):
    b = PipelineBuilder().add_source(images).pipe(ops.read_file(), concurrency=4)
    b = b.pipe(ops.decode_image(width=4, height=4), concurrency=3)
    out, _ = run(b.add_sink(4))
    assert sorted(label for _, label in out) == list(range(20))
    for image, label in out:
        assert isinstance(image, feedline.io.Buffer) and image.shape == (4, 4, 3)
        assert level(image) == 10 * label


def test_dicts_keep_every_other_key_untouched(images):
    meta = [object() for _ in images]
    src = [{"path": p, "label": label, "meta": m} for (p, label), m in zip(images, meta)]
    b = PipelineBuilder().add_source(src).pipe(ops.read_file(field="path"), concurrency=2)
    b = b.pipe(ops.decode_image(field="path", width=3, height=2), concurrency=2)
    out, _ = run(b.add_sink(4))
    out.sort(key=lambda s: s["label"])
    assert [s["label"] for s in out] == list(range(20))
    for s, m in zip(out, meta):
        assert set(s) == {"path", "label", "meta"} and s["meta"] is m
        assert level(s["path"]) == 10 * s["label"]
    assert "path" in src[0] and isinstance(src[0]["path"], str)  # sources unchanged


def test_other_positions_and_shapes(images):
    # The payload at index 1 of a 3-tuple; a Python op in between sees the tuple.
    src = [(label, p, f"id{label}") for p, label in images]
    b = PipelineBuilder().add_source(src).pipe(ops.read_file(field=1))
    b = b.pipe(lambda s: (s[0], s[1], s[2].upper())).pipe(ops.decode_image(field=-2, width=2, height=2))
    out, _ = run(b.add_sink(4))
    assert {(label, level(img), i) for label, img, i in out} == {(x, 10 * x, f"ID{x}") for x in range(20)}


def test_decode_batch_gives_the_batch_and_the_carried_columns(images):
    b = PipelineBuilder().add_source(images).pipe(ops.read_file(), concurrency=3, output_order="input")
    b = b.aggregate(6).pipe(ops.decode_batch(width=5, height=5))
    out, _ = run(b.add_sink(4))
    assert [len(labels) for _, labels in out] == [6, 6, 6, 2]
    for batch, labels in out:
        assert batch.shape == (len(labels), 5, 5, 3)
        assert [level(row) for row in np.asarray(batch)] == [10 * x for x in labels]
    assert [x for _, labels in out for x in labels] == list(range(20))


def test_a_corrupt_image_mid_batch_drops_its_label_and_counts(tmp_path, images):
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"\x89PNG but not really")
    src = list(images[:8])
    src[3] = (str(bad), 99)
    src[6] = (str(tmp_path / "missing.png"), 98)
    dicts = [{"img": p, "label": label} for p, label in src]
    b = PipelineBuilder().add_source(dicts).pipe(ops.read_file(field="img"), output_order="input")
    b = b.aggregate(4).pipe(ops.decode_batch(field="img", width=3, height=3), name="decode")
    out, stats = run(b.add_sink(4))
    assert [s["label"] for s in out] == [[0, 1, 2], [4, 5, 7]]
    for s in out:
        assert [level(row) for row in np.asarray(s["img"])] == [10 * x for x in s["label"]]
    assert stats.stages[1].failures == 1  # the missing file, in read_file
    assert next(s for s in stats.stages if "decode" in s.name).failures == 1


def test_stack_after_load_npy_keeps_rows_and_labels(tmp_path):
    src = []
    for i in range(7):
        np.save(tmp_path / f"{i}.npy", np.full((2, 3), i, dtype=np.int16))
        src.append((str(tmp_path / f"{i}.npy"), f"label{i}", i * i))
    b = PipelineBuilder().add_source(src).pipe(ops.read_file(), concurrency=2).pipe(ops.load_npy(), concurrency=2)
    out, _ = run(b.aggregate(3).pipe(ops.stack()).add_sink(4))
    rows = 0
    for arrays, labels, squares in out:
        arrays = np.asarray(arrays)
        assert arrays.shape == (len(labels), 2, 3)
        for a, label, sq in zip(arrays, labels, squares):
            assert label == f"label{a[0, 0]}" and sq == a[0, 0] ** 2
        rows += len(labels)
    assert rows == 7


def test_failures_name_the_payload_or_the_missing_field(tmp_path):
    missing = str(tmp_path / "nope.png")
    p = PipelineBuilder().add_source([(missing, 1)]).pipe(ops.read_file()).add_sink(1)
    p = p.build(num_threads=1, max_failures=0)
    with p.auto_stop(), pytest.raises(PipelineFailure) as info:
        list(p)
    cause = info.value.exceptions[0].__cause__
    assert type(cause) is feedline.IoError and "nope.png" in str(cause)

    (tmp_path / "ok").write_bytes(b"ok")
    src = [{"label": 1}, {"path": 3, "label": 2}, {"path": str(tmp_path / "ok"), "label": 3}]
    p = PipelineBuilder().add_source(src).pipe(ops.read_file(field="path")).add_sink(1)
    p = p.build(num_threads=1, max_failures=5)
    with p.auto_stop():
        assert list(p) == [{"path": b"ok", "label": 3}]
    assert p.stats().stages[1].failures == 2
    p = PipelineBuilder().add_source(src[:1]).pipe(ops.read_file(field="path")).add_sink(1)
    p = p.build(num_threads=1, max_failures=0)
    with p.auto_stop(), pytest.raises(PipelineFailure) as info:
        list(p)
    cause = info.value.exceptions[0].__cause__
    assert type(cause) is ValueError and "no field 'path'" in str(cause) and "field=" in str(cause)


def test_field_must_be_an_index_or_a_key():
    for bad in (1.5, True, b"x", ("a",)):
        with pytest.raises(TypeError, match="field"):
            ops.read_file(field=bad)
    assert ops.read_file(field=None).name == "read_file"  # payloads only


def test_an_op_on_another_field_takes_it_from_the_record(tmp_path):
    # A sample whose payload is "a" reaches an op on "b": the op takes "b"
    # from the record (once more through Python) and "a" keeps its result.
    (tmp_path / "a").write_bytes(b"A")
    buf = io.BytesIO()
    np.save(buf, np.arange(3, dtype=np.int32))
    src = [{"a": str(tmp_path / "a"), "b": buf.getvalue(), "n": 1}]
    b = PipelineBuilder().add_source(src).pipe(ops.read_file(field="a")).pipe(ops.load_npy(field="b"))
    out, _ = run(b.add_sink(1))
    assert out[0]["a"] == b"A" and out[0]["n"] == 1
    assert np.asarray(out[0]["b"]).tolist() == [0, 1, 2]


def test_a_batch_op_on_another_field_takes_it_from_each_record(tmp_path):
    # Rows whose payload is "a" (read_file) batched, then decode_batch on
    # "b": it decodes each row's "b", and "a" keeps its rows' results. It
    # decoded the "a" payloads instead, under "a", and "b" stayed bytes.
    (tmp_path / "a.png").write_bytes(png(200))
    src = [{"a": str(tmp_path / "a.png"), "b": png(7), "n": i} for i in range(4)]
    b = (
        PipelineBuilder()
        .add_source(src)
        .pipe(ops.read_file(field="a"))
        .aggregate(2)
        .pipe(ops.decode_batch(field="b", width=2, height=2), name="decode")
    )
    out, stats = run(b.add_sink(2), num_threads=1)
    assert len(out) == 2
    for batch in out:
        assert np.asarray(batch["b"]).shape == (2, 2, 2, 3)
        assert (np.asarray(batch["b"]) == 7).all()
        assert batch["a"] == [png(200), png(200)]
        assert batch["n"] in ([0, 1], [2, 3])
    assert all(s.failures == 0 for s in stats.stages)


def test_a_damaged_archive_member_costs_itself_not_the_members_after_it():
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name in ("a", "b", "c"):
            z.writestr(name, (name * 2000).encode())
    data = bytearray(buf.getvalue())
    info = zipfile.ZipFile(io.BytesIO(bytes(data))).getinfo("b")
    body = info.header_offset + 30 + len("b")
    data[body : body + info.compress_size] = b"\xff" * info.compress_size  # b's deflate stream
    b = PipelineBuilder().add_source([bytes(data)]).pipe(ops.zip_members(), name="zip")
    out, stats = run(b.add_sink(4), num_threads=1, max_failures=10)
    assert [bytes(m) for m in out] == [b"a" * 2000, b"c" * 2000]
    assert next(s for s in stats.stages if s.name.endswith("zip")).failures == 1


def test_no_conversion_between_native_stages_only_at_the_seams(images):
    to_py, from_py = testing.conversion_counts()
    b = PipelineBuilder().add_source(images).pipe(ops.read_file(), concurrency=2)
    b = b.pipe(ops.decode_image(width=2, height=2)).aggregate(5).pipe(ops.stack())
    out, _ = run(b.add_sink(4))
    assert len(out) == 4
    to_py2, from_py2 = testing.conversion_counts()
    # Each path in once; each batch out once, with its Buffer.
    assert (from_py2 - from_py, to_py2 - to_py) == (20, 8)


def test_labels_ride_through_native_stages_while_python_holds_the_gil(tmp_path):
    # One sample, (a TAR of n PNGs, label), enters; native stages split it
    # and decode each member, each a sample of the same label. The test then
    # holds the GIL (a huge switch interval; stats() keeps the GIL) and polls
    # until the decode stage has finished every member: possible only if
    # carrying the label and running the ops never take the GIL.
    n = 24
    big = png(77, w=1200, h=900)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for i in range(n):
            info = tarfile.TarInfo(f"{i}.png")
            info.size = len(big)
            tar.addfile(info, io.BytesIO(big))
    label = object()
    p = (
        PipelineBuilder()
        .add_source([(buf.getvalue(), label)])
        .pipe(ops.tar_members())
        .pipe(ops.decode_image(width=8, height=8), concurrency=1)
        .add_sink(n + 2)
        .build(num_threads=2)
    )

    def decode_stats():
        return next(s for s in p.stats().stages if "decode" in s.name)

    deadline = time.monotonic() + 120
    with p.auto_stop():
        while decode_stats().items_in < 1:
            assert time.monotonic() < deadline
        old = sys.getswitchinterval()
        sys.setswitchinterval(1000.0)
        try:
            before = decode_stats().items_out
            while decode_stats().items_out < n:
                assert time.monotonic() < deadline, "decoding stopped while Python held the GIL"
        finally:
            sys.setswitchinterval(old)
        out = list(p)
    assert before < n  # there was decoding left to do during the hold
    assert len(out) == n
    assert all(lab is label and level(img) == 77 for img, lab in out)


def test_decode_batch_takes_python_samples_of_bytes():
    # (bytes, label) straight from a Python source into aggregate ->
    # decode_batch: the batch converts each sample once, and an element that
    # does not decode or convert drops its label too.
    src = [(png(10 * i), i) for i in range(6)]
    src[2] = (b"junk", 2)
    src[4] = ("a path, not bytes", 4)
    b = PipelineBuilder().add_source(src).aggregate(6).pipe(ops.decode_batch(width=2, height=2), name="decode")
    out, stats = run(b.add_sink(2))
    [(batch, labels)] = out
    assert labels == [0, 1, 3, 5]
    assert [level(row) for row in np.asarray(batch)] == [0, 10, 30, 50]
    assert next(s for s in stats.stages if "decode" in s.name).failures == 2


def test_records_are_rebuilt_in_their_shape():
    from feedline import _samples

    assert _samples.field(("p", 3), -2) == "p"
    with pytest.raises(ValueError, match=r"no field 'x'.*field="):
        _samples.field({"p": 1}, "x")
    record = {"p": "a.jpg", "label": 3}
    assert _samples.with_field(record, "p", 7) == {"p": 7, "label": 3} and record["p"] == "a.jpg"
    assert _samples.with_field(("a", 3, "id"), -3, 7) == (7, 3, "id")
    assert _samples.columns([("a", 1, "x"), ("b", 2, "y")], -3, "B") == ("B", [1, 2], ["x", "y"])
    assert _samples.columns([{"p": 1, "l": 2}, {"l": 4, "p": 3}], "p", "B") == {"p": "B", "l": [2, 4]}
    with pytest.raises(ValueError, match="differ in shape"):
        _samples.columns([("a", 1, "x"), ("b", 2)], 0, "B")
    with pytest.raises(ValueError, match="differ in shape"):
        _samples.columns([{"p": 1, "l": 2}, {"p": 3}], "p", "B")
    # Records keep their type: a namedtuple, a dict subclass.
    import collections

    Row = collections.namedtuple("Row", "path label")
    assert _samples.with_field(Row("a.jpg", 3), 0, 7) == Row(7, 3)
    assert type(_samples.with_field(Row("a.jpg", 3), 0, 7)) is Row
    assert _samples.columns([Row("a", 1), Row("b", 2)], 0, "B") == Row("B", [1, 2])
    ordered = collections.OrderedDict(p=1, label=2)
    assert type(_samples.with_field(ordered, "p", 7)) is collections.OrderedDict
    assert type(_samples.columns([ordered, ordered], "p", "B")) is collections.OrderedDict
    # A row with a field the first lacks: refused, not that field dropped.
    with pytest.raises(ValueError, match="differ in shape: field 'id'"):
        _samples.columns([{"p": 1, "l": 2}, {"p": 3, "l": 4, "id": 5}], "p", "B")
    with pytest.raises(ValueError, match="differ in shape: field 2"):
        _samples.columns([("a", 1), ("b", 2, "x")], 0, "B")


def test_an_op_on_a_sample_runs_without_the_gil(images):
    # A native op on a sample's field runs on a pool thread without the GIL
    # (the probe reports it) and the label rides along; the control probe
    # takes the GIL and sees it.
    from feedline._feedline_ext import io as _io

    for take_gil in (False, True):
        probe = _io.on_field(testing.gil_probe(take_gil=take_gil), 0)
        b = PipelineBuilder().add_source(images).pipe(ops.read_file()).pipe(probe, concurrency=2)
        out, _ = run(b.add_sink(4))
        assert sorted(out, key=lambda s: s[1]) == [(take_gil, label) for _, label in images]
