"""The shared-memory hand-off of feedline.pipeline._arena: round trips of each
payload kind, zero copy, segment lifetime, errors, and a stamp-and-verify run
across a spawned writer process."""

from __future__ import annotations

import gc
import io
import multiprocessing
import os
import pickle
import queue
import zlib
from multiprocessing import resource_tracker

import numpy as np
import pytest

import feedline
import feedline.io as fio
from feedline.pipeline._arena import SharedMemoryRingBuffer, SharedMemorySegmentPool, discard, offload, restore

MIB = 1 << 20


def _envelope_segment(data: bytes) -> int:
    return int.from_bytes(data[:8], "little", signed=True)


def _data_pointer(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


@pytest.fixture
def pool():
    p = SharedMemorySegmentPool(4 * MIB, 2, acquire_timeout=0)
    yield p
    p.close()


def test_small_item_takes_no_segment(pool):
    item = {"x": 1, "y": b"small", "z": np.arange(3)}
    env = offload(item, pool)
    assert _envelope_segment(env) == -1
    assert pool.free_segments() == 2
    out = restore(env, pool)
    assert out["x"] == 1 and out["y"] == b"small"
    np.testing.assert_array_equal(out["z"], np.arange(3))


@pytest.mark.parametrize("kind", [bytes, bytearray])
def test_bytes_come_back_as_read_only_memoryviews(pool, kind):
    payload = kind(os.urandom(10000))
    out = restore(offload([payload, "tail"], pool), pool)
    assert isinstance(out[0], memoryview) and out[0].readonly
    assert bytes(out[0]) == bytes(payload) and out[1] == "tail"


def test_memoryviews_of_any_size_keep_format_and_shape(pool):
    ints = np.arange(24, dtype=np.int32).reshape(4, 6)
    out = restore(offload((memoryview(b"tiny"), memoryview(ints)), pool), pool)
    assert bytes(out[0]) == b"tiny"
    assert out[1].format == "i" and out[1].shape == (4, 6)
    assert out[1].tolist() == ints.tolist()


@pytest.mark.parametrize("kind", ["pool", "ring"])
@pytest.mark.parametrize(
    "array",
    [
        np.arange(6000, dtype=">i4"),  # a format memoryview.cast does not take
        np.zeros((3, 0), np.float32),  # a zero in the shape, which cast refuses
        np.zeros(2000, dtype=[("a", "<i4"), ("b", "<f8")]),
        np.array(5),
    ],
)
def test_memoryviews_cast_cannot_rebuild_keep_format_and_shape(pool, ring, kind, array):
    # They came back as flat bytes (format "B"), with no error.
    view = memoryview(array)
    out = restore(offload(view, pool if kind == "pool" else ring), pool if kind == "pool" else ring)
    assert isinstance(out, memoryview)
    assert (out.format, out.shape) == (view.format, view.shape)
    assert out.tobytes() == view.tobytes()


@pytest.mark.parametrize(
    "array",
    [
        np.arange(100000, dtype=np.float32).reshape(100, 1000),
        np.arange(20000, dtype=np.int64)[::3],  # non-contiguous
        np.asfortranarray(np.arange(6000, dtype=np.float64).reshape(60, 100)),
        np.arange(10000, dtype=">u4"),  # big-endian
        np.arange(5000).astype("datetime64[s]"),
        np.ones(8000, dtype=bool),
        np.zeros(2000, dtype=[("a", "<i4"), ("b", "<f8")]),
        np.arange(4096, dtype=np.complex64).reshape(2, 2, 1024),
        np.zeros(1000, dtype=[("xy", "<f4", (2,)), ("tag", "S3")]),  # a subarray field
        np.arange(3000).astype(np.dtype(np.int32, metadata={"unit": "m"})),
        np.array(["feedline", "shared"] * 500, dtype="<U8"),
        np.array([b"abc", b"de"] * 2000, dtype="S3"),
        np.frombuffer(bytes(range(256)) * 40, dtype="V8"),
        np.arange(5000, dtype=np.float16),
    ],
    ids=[
        "f32",
        "strided",
        "fortran",
        "big-endian",
        "datetime",
        "bool",
        "struct",
        "c64",
        "subarray-field",
        "metadata",
        "unicode",
        "bytes",
        "void",
        "f16",
    ],
)
@pytest.mark.parametrize("kind", ["pool", "ring"])
def test_numpy_arrays_keep_dtype_shape_and_values(pool, array, kind):
    where = pool if kind == "pool" else SharedMemoryRingBuffer(4 * MIB, acquire_timeout=0)
    out = restore(offload({"a": array}, where), where)["a"]
    assert type(out) is np.ndarray
    assert out.dtype == array.dtype and out.shape == array.shape
    assert out.dtype.metadata == array.dtype.metadata
    assert out.dtype.descr == array.dtype.descr  # field names, offsets, subarrays
    np.testing.assert_array_equal(out, array)
    assert out.flags.c_contiguous and out.flags.writeable


def test_a_plain_dtype_travels_as_its_name(pool):
    # A dtype object pickles through its reduce protocol, a dozen objects
    # for the pickler; a plain one goes as its name ('<f4'): the envelope
    # names no NumPy class and holds the shape, the offset and that name.
    array = np.arange(100000, dtype=np.float32).reshape(100, 1000)
    env = offload(array, pool)
    assert b"numpy" not in env and b"<f4" in env
    np.testing.assert_array_equal(restore(env, pool), array)
    # One that its name does not describe keeps the dtype object.
    struct = np.zeros(2000, dtype=[("a", "<i4"), ("b", "<f8")])
    env = offload(struct, pool)
    assert b"numpy" in env
    discard(env, pool)


def test_large_arrays_copied_on_several_threads_arrive_whole():
    # From 4 MiB the worker's copy into the segment is split between threads.
    big = SharedMemorySegmentPool(12 * MIB, 1, acquire_timeout=0)
    try:
        array = np.random.default_rng(7).integers(0, 256, 9 * MIB + 5, dtype=np.uint8)
        out = restore(offload(array, big), big)
        np.testing.assert_array_equal(out, array)
    finally:
        big.close()


def test_object_arrays_are_pickled_normally(pool):
    array = np.array([{"k": i} for i in range(1000)], dtype=object)
    env = offload(array, pool)
    assert _envelope_segment(env) == -1
    assert restore(env, pool)[999] == {"k": 999}


def test_feedline_buffers_come_back_as_buffers(pool):
    pil = pytest.importorskip("PIL.Image")
    png = io.BytesIO()
    pil.fromarray(np.arange(48 * 64 * 3, dtype=np.uint8).reshape(48, 64, 3)).save(png, "PNG")
    buf = fio.decode_image(png.getvalue())
    assert isinstance(buf, fio.Buffer)
    out = restore(offload({"img": buf}, pool), pool)["img"]
    assert isinstance(out, fio.Buffer)
    assert out.shape == buf.shape and out.dtype == buf.dtype
    np.testing.assert_array_equal(fio.to_numpy(out), fio.to_numpy(buf))


def test_torch_tensors_come_back_as_tensors(pool):
    torch = pytest.importorskip("torch")
    tensors = {
        "f32": torch.arange(10000, dtype=torch.float32).reshape(100, 100),
        "bf16": torch.arange(5000, dtype=torch.bfloat16),
        "strided": torch.arange(20000, dtype=torch.int64)[::2],
        "grad": torch.ones(2000, requires_grad=True),
        "bool": torch.ones(8000, dtype=torch.bool),
    }
    out = restore(offload(tensors, pool), pool)
    assert _envelope_segment(offload(tensors, pool)) >= 0
    for name, t in tensors.items():
        assert type(out[name]) is torch.Tensor, name
        assert out[name].dtype == t.dtype and out[name].shape == t.shape, name
        assert torch.equal(out[name], t.detach()), name
    assert out["grad"].requires_grad
    assert not out["f32"].requires_grad


def test_restored_views_are_zero_copy_and_hold_the_segment(pool):
    a = np.full(100000, 1, dtype=np.uint8)
    b = np.full(50000, 2, dtype=np.uint8)
    env = offload((a, b), pool)
    assert pool.free_segments() == 1  # published, not yet adopted
    ra, rb = restore(env, pool)
    # Both leaves view the one unit, laid out 64-byte aligned one after the
    # other: no copy was made on the way in.
    assert _data_pointer(rb) - _data_pointer(ra) == 100032
    assert isinstance(ra.base, np.ndarray) or isinstance(ra.base, fio.Buffer)
    del ra
    gc.collect()
    assert pool.free_segments() == 1  # rb still views the segment
    part = rb[10:20]
    del rb
    gc.collect()
    assert pool.free_segments() == 1  # a slice of it still does
    del part
    gc.collect()
    assert pool.free_segments() == 2


def test_views_outlive_the_pool_object(pool):
    env = offload(np.arange(10000), pool)
    out = restore(env, pool)
    pool.close()
    del pool
    gc.collect()
    np.testing.assert_array_equal(out, np.arange(10000))


def test_a_failed_offload_frees_its_segment(pool):
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        offload([np.zeros(100000), lambda: 0], pool)
    assert pool.free_segments() == 2
    with pytest.raises(ValueError, match="do not fit in a segment of 4194304 bytes"):
        offload([np.zeros(3 * MIB, np.uint8), np.zeros(2 * MIB, np.uint8)], pool)
    assert pool.free_segments() == 2


def test_a_full_pool_times_out_and_a_shut_down_one_cancels(pool):
    held = [restore(offload(np.zeros(10000), pool), pool) for _ in range(2)]
    with pytest.raises(feedline.Timeout, match="all 2 segments"):
        offload(np.zeros(10000), pool)
    with pytest.raises(TimeoutError):
        offload(np.zeros(10000), pool, timeout=0.01)
    pool.shutdown()
    with pytest.raises(feedline.Cancelled):
        offload(np.zeros(10000), pool)
    assert offload(b"small", pool)  # needs no segment
    del held


def test_discard_frees_an_envelope_never_restored(pool):
    env = offload(np.zeros(10000), pool)
    assert pool.free_segments() == 1
    discard(env, pool)
    assert pool.free_segments() == 2
    with pytest.raises(ValueError, match="not published"):
        restore(env, pool)


def test_bad_arguments():
    with pytest.raises(ValueError, match="segment_size"):
        SharedMemorySegmentPool(0, 1)
    with pytest.raises(ValueError, match="count"):
        SharedMemorySegmentPool(1, 0)
    with pytest.raises(ValueError, match="acquire_timeout"):
        SharedMemorySegmentPool(1, 1, acquire_timeout=-1)
    p = SharedMemorySegmentPool(4096, 1)
    with pytest.raises(ValueError, match="threshold"):
        offload(b"", p, threshold=0)
    with pytest.raises(IndexError):
        restore((5).to_bytes(8, "little") + bytes(8) + pickle.dumps(1), p)
    p.close()
    p.unlink()  # no name to unlink: a no-op
    with pytest.raises(ValueError, match="closed"):
        p.free_segments()


def test_pickled_pool_maps_the_same_memory():
    p = SharedMemorySegmentPool(8192, 2)
    q = pickle.loads(pickle.dumps(p))  # through the resource sharer
    assert (q.segment_size, q.count) == (8192, 2)
    env = offload(np.arange(1000), p)
    assert q.free_segments() == 1
    np.testing.assert_array_equal(restore(env, q), np.arange(1000))
    assert p.free_segments() == 2


# --- Stamp and verify across a spawned writer ---------------------------------

ITEM_BYTES = 256 * 1024


def _stamped(index: int) -> np.ndarray:
    """ITEM_BYTES bytes: the index, bytes drawn from it, then their CRC."""
    a = np.random.default_rng(index).integers(0, 256, ITEM_BYTES, dtype=np.uint8)
    a[:8] = np.frombuffer(index.to_bytes(8, "little"), np.uint8)
    a[-4:] = np.frombuffer(zlib.crc32(a[:-4]).to_bytes(4, "little"), np.uint8)
    return a


def _verify(a: np.ndarray, index: int) -> bool:
    return (
        int.from_bytes(a[:8].tobytes(), "little") == index
        and zlib.crc32(a[:-4]) == int.from_bytes(a[-4:].tobytes(), "little")
        and np.array_equal(a, _stamped(index))
    )


def _write_epochs(pool, out, epochs: int, per_epoch: int) -> None:
    """The spawned writer: each unit first tries not to wait and says so
    when every segment is held, then waits for the reader to free one."""
    for epoch in range(epochs):
        for i in range(per_epoch):
            index = epoch * per_epoch + i
            item = {"index": index, "data": _stamped(index)}
            try:
                env = offload(item, pool, timeout=0)
            except feedline.Timeout:
                out.put(("full", index))
                env = offload(item, pool)
            out.put(("unit", index, env))
        out.put(("epoch", epoch))
    out.put(("done", None))


def _memfd_links() -> list[str]:
    links = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass
    return [x for x in links if x.startswith("/memfd:feedline-arena")]


def _next_message(out, writer):
    while True:
        try:
            return out.get(timeout=1)
        except queue.Empty:
            assert writer.is_alive(), f"the writer died ({writer.exitcode})"


def test_stamp_and_verify_across_a_spawned_writer():
    ctx = multiprocessing.get_context("spawn")
    resource_tracker.ensure_running()  # started once per process, not a leak
    shm_before = set(os.listdir("/dev/shm"))
    fds_before = set(os.listdir("/proc/self/fd"))

    segments, epochs, per_epoch = 4, 3, 8
    pool = SharedMemorySegmentPool(ITEM_BYTES + 4096, segments, acquire_timeout=60)
    out = ctx.Queue()
    writer = ctx.Process(target=_write_epochs, args=(pool, out, epochs, per_epoch))
    writer.start()

    # The reader keeps units 0 and 1 for the whole run (across every epoch),
    # keeps each unit of epoch 0 until the writer reports the pool full, and
    # drops the others at once; it re-verifies everything it holds each time.
    forever: dict[int, np.ndarray] = {}
    held: dict[int, np.ndarray] = {}
    fulls, seen, epochs_seen = 0, 0, 0

    def check_all() -> None:
        for index, view in {**forever, **held}.items():
            assert _verify(view, index), f"unit {index} changed under its view"

    while True:
        msg = _next_message(out, writer)
        if msg[0] == "done":
            break
        if msg[0] == "epoch":
            epochs_seen += 1
            check_all()
            continue
        if msg[0] == "full":
            check_all()
            if msg[1] < per_epoch:  # the reader has freed nothing so far
                fulls += 1
                assert pool.free_segments() == 0
            if held:
                del held[min(held)]  # frees one segment: the writer continues
                gc.collect()
            # Else the unit the reader is about to drop frees one.
            continue
        _, index, env = msg
        assert index == seen
        seen += 1
        item = restore(env, pool)
        assert item["index"] == index and _verify(item["data"], index)
        if index < 2:
            forever[index] = item["data"]
        elif index < per_epoch:
            held[index] = item["data"]
        del item
        check_all()

    writer.join(timeout=60)
    assert writer.exitcode == 0
    assert seen == epochs * per_epoch and epochs_seen == epochs
    # Units 2 and 3 fill the two segments left; from unit 4 on, each unit of
    # epoch 0 finds all held until the reader lets one go (its last two are
    # held into epoch 1).
    assert fulls == per_epoch - segments
    check_all()
    assert set(forever) == {0, 1}

    forever.clear()
    held.clear()
    gc.collect()
    assert pool.free_segments() == segments
    pool.close()
    del pool
    gc.collect()
    writer.close()
    out.close()
    out.join_thread()
    del out, writer  # the Queue's pipe ends close when it is collected
    gc.collect()
    # The arena never names its memory; the Queue's semaphores (sem.*) are
    # multiprocessing's, and other processes of the machine may add theirs.
    assert {x for x in os.listdir("/dev/shm") if not x.startswith("sem.")} <= shm_before
    assert _memfd_links() == []
    assert set(os.listdir("/proc/self/fd")) <= fds_before


def _offload_one(pool, inbox, out) -> None:
    if pool is None:
        pool = inbox.get()  # the pool itself travels through a queue
    out.put(offload(np.arange(5000, dtype=np.int64) * 3, pool))


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
@pytest.mark.parametrize("route", ["args", "queue"])
def test_pool_reaches_a_child_by_args_or_queue(method, route):
    ctx = multiprocessing.get_context(method)
    pool = SharedMemorySegmentPool(64 * 1024, 1)
    inbox, out = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=_offload_one, args=(pool if route == "args" else None, inbox, out))
    child.start()
    if route == "queue":
        inbox.put(pool)
    arr = restore(_next_message(out, child), pool)
    np.testing.assert_array_equal(arr, np.arange(5000, dtype=np.int64) * 3)
    child.join(timeout=60)
    assert child.exitcode == 0
    del arr
    assert pool.free_segments() == 1


def _drop_and_report(holder: list, pool, out) -> None:
    holder.clear()
    gc.collect()
    out.put(pool.free_segments())


def test_a_forked_child_dropping_inherited_views_frees_nothing():
    ctx = multiprocessing.get_context("fork")
    pool = SharedMemorySegmentPool(64 * 1024, 1)
    holder = [restore(offload(np.arange(5000), pool), pool)]
    out = ctx.Queue()
    child = ctx.Process(target=_drop_and_report, args=(holder, pool, out))
    child.start()
    assert _next_message(out, child) == 0  # the parent's view still holds it
    child.join(timeout=60)
    assert pool.free_segments() == 0
    np.testing.assert_array_equal(holder[0], np.arange(5000))
    holder.clear()
    gc.collect()
    assert pool.free_segments() == 1


# --- SharedMemoryRingBuffer: copies out --------------------------------------------


@pytest.fixture
def ring():
    r = SharedMemoryRingBuffer(1 * MIB, acquire_timeout=0)
    yield r
    r.close()


def test_ring_leaves_come_back_as_private_copies_of_the_same_type(ring):
    pil = pytest.importorskip("PIL.Image")
    png = io.BytesIO()
    pil.fromarray(np.arange(48 * 64 * 3, dtype=np.uint8).reshape(48, 64, 3)).save(png, "PNG")
    image = fio.decode_image(png.getvalue())
    item = {
        "bytes": bytes(range(256)) * 40,
        "bytearray": bytearray(b"z" * 5000),
        "view": memoryview(np.arange(600, dtype=np.int32).reshape(20, 30)),
        "array": np.arange(20000, dtype=np.float64).reshape(100, 200),
        "buffer": image,
        "small": b"stays in the pickle",
    }
    env = offload(item, ring)
    assert _envelope_segment(env) >= 0 and ring.used() > 0
    out = restore(env, ring)
    assert ring.used() == 0  # freed as soon as it is copied out
    assert type(out["bytes"]) is bytes and out["bytes"] == item["bytes"]
    assert type(out["bytearray"]) is bytearray and out["bytearray"] == item["bytearray"]
    assert out["view"].format == "i" and out["view"].shape == (20, 30) and not out["view"].readonly
    assert out["view"].tolist() == item["view"].tolist()
    assert out["array"].flags.writeable and out["array"].dtype == np.float64
    np.testing.assert_array_equal(out["array"], item["array"])
    assert isinstance(out["buffer"], fio.Buffer)
    np.testing.assert_array_equal(fio.to_numpy(out["buffer"]), fio.to_numpy(image))
    assert out["small"] == item["small"]


def test_ring_copies_never_change_when_the_ring_is_reused(ring):
    kept = []
    for i in range(40):  # 40 x 200 KiB through a 1 MiB ring: every byte reused
        a = np.full(200 * 1024, i % 251, np.uint8)
        kept.append((i, restore(offload(a, ring), ring)))
        for j, copy in kept:
            assert int(copy.min()) == int(copy.max()) == j % 251, f"copy {j} changed"


def test_ring_torch_tensors_come_back_as_tensors(ring):
    torch = pytest.importorskip("torch")
    t = {
        "f32": torch.arange(10000, dtype=torch.float32).reshape(100, 100),
        "grad": torch.ones(2000, requires_grad=True),
    }
    out = restore(offload(t, ring), ring)
    assert torch.equal(out["f32"], t["f32"]) and out["grad"].requires_grad


def test_a_full_ring_times_out_a_too_large_item_is_refused_and_shutdown_cancels(ring):
    pending = offload(np.zeros(700 * 1024, np.uint8), ring)
    with pytest.raises(feedline.Timeout, match="not yet released"):
        offload(np.zeros(400 * 1024, np.uint8), ring)
    assert ring.used() == 700 * 1024  # the failed unit took nothing
    with pytest.raises(ValueError, match="does not fit in a ring of 1048576 bytes"):
        offload(np.zeros(MIB + 1, np.uint8), ring)
    discard(pending, ring)
    assert ring.used() == 0
    assert restore(offload(np.ones(400 * 1024, np.uint8), ring), ring).sum() == 400 * 1024
    ring.shutdown()
    with pytest.raises(feedline.Cancelled):
        offload(np.zeros(10000), ring)
    assert offload(b"small", ring)  # needs no room


def test_ring_bad_arguments_and_pickling():
    with pytest.raises(ValueError, match="capacity"):
        SharedMemoryRingBuffer(0)
    with pytest.raises(ValueError, match="acquire_timeout"):
        SharedMemoryRingBuffer(1, acquire_timeout=-1)
    r = SharedMemoryRingBuffer(64 * 1024)
    q = pickle.loads(pickle.dumps(r))  # through the resource sharer
    assert q.capacity == 64 * 1024
    env = offload(np.arange(1000), r)
    assert q.used() == 8000
    np.testing.assert_array_equal(restore(env, q), np.arange(1000))
    assert r.used() == 0
    r.close()
    r.unlink()
    with pytest.raises(ValueError, match="closed"):
        r.used()
