"""Hands large items from a worker process to its parent through shared memory.

:class:`SharedMemorySegmentPool` is a pool of equal shared-memory segments
(``feedline._feedline_ext._SharedArena``, a C++ arena in one anonymous
``memfd`` file, so nothing is ever left in ``/dev/shm``). The worker calls
:func:`offload` on each item: the item is pickled, except that its large
leaves (``bytes``, ``bytearray``, ``memoryview``, NumPy arrays, CPU torch
tensors, feedline Buffers, media Packets) are copied once into one segment and replaced by
small markers. The result, the *envelope*, is a few hundred bytes whatever
the item's size; it travels through any queue. The parent calls
:func:`restore`, which takes the segment over and rebuilds each leaf as a
zero-copy view of it.

Memory is reused only when nothing in the parent looks at it any more: the
segment is freed when the last view rebuilt from it (and every NumPy array,
tensor or memoryview derived from those) is garbage-collected. Views stay
valid across epochs, re-iterations and ``break``; there is no reset. While
every segment is held the worker waits in :func:`offload` (up to the pool's
``acquire_timeout``) instead of overwriting anything.

:class:`SharedMemoryRingBuffer` is the copying alternative (a C++ byte ring,
``_SharedRing``): items of any size up to its capacity share it, and
:func:`restore` copies each leaf out into memory of its own (bytes stay
bytes, arrays are writable) and frees the item's bytes at once, so nothing
the consumer keeps pins the ring. Envelopes must be restored (or discarded)
in the order they were made.
"""

from __future__ import annotations

import functools
import io
import os
import pickle
import struct
import sys
from multiprocessing import reduction
from typing import Any

from .. import _feedline_ext as _ext
from .._feedline_ext import io as _io

__all__ = ["SharedMemoryRingBuffer", "SharedMemorySegmentPool", "discard", "offload", "restore"]

# The envelope: where the item's leaves are (a pool's segment number and 0,
# or a ring's span; -1: none) and then the pickle.
_HEADER = struct.Struct("<qq")
_NO_SEGMENT = -1


class _SharedMemory:
    """What the pool and the ring share: a native handle (None once closed),
    the writer's wait, and pickling as a duplicate of the memory file's
    descriptor."""

    _native: Any  # the C++ class: attach(fd) maps its memory file

    def __init__(self, acquire_timeout: float) -> None:
        if acquire_timeout < 0:
            raise ValueError(f"acquire_timeout must be >= 0, got {acquire_timeout}")
        self._acquire_timeout = float(acquire_timeout)
        self._handle: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {"acquire_timeout": self._acquire_timeout, "fd": reduction.DupFd(self._live().fd)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        fd = state["fd"].detach()
        try:
            self._handle = self._native.attach(fd)
        finally:
            os.close(fd)  # the native object holds its own duplicate
        self._acquire_timeout = state["acquire_timeout"]

    @property
    def acquire_timeout(self) -> float:
        """Seconds :func:`offload` waits for room."""
        return self._acquire_timeout

    @property
    def closed(self) -> bool:
        """True after :meth:`close` in this process."""
        return self._handle is None

    def shutdown(self) -> None:
        """Wakes every worker waiting for room, in every process; later waits
        in :func:`offload` raise ``feedline.Cancelled``. What was restored
        stays valid."""
        self._live().shutdown()

    shutdown_arena = shutdown

    def close(self) -> None:
        """Drops this process's handle. Views restored earlier keep their
        memory mapped until they are gone. Idempotent."""
        self._handle = None

    def unlink(self) -> None:
        """Does nothing: the memory is an anonymous file with no name, freed
        by the kernel once every process has closed it and dropped its views.
        Kept so that code written for SPDL runs unchanged."""

    def _live(self) -> Any:
        if self._handle is None:
            raise ValueError(f"the {type(self).__name__} is closed")
        return self._handle


class SharedMemorySegmentPool(_SharedMemory):
    """A pool of ``count`` shared-memory segments of ``segment_size`` bytes.

    Each item handed over with :func:`offload` takes one segment, for as long
    as the receiving process keeps any view of it. Make the pool in the
    parent and pass it to the worker process (as a ``Process`` argument or
    through a queue): it pickles as a duplicate of the memory file's
    descriptor, so a ``spawn`` or ``forkserver`` child maps the same memory
    (a ``fork`` child inherits it).

    Args:
        segment_size: Bytes of each segment: at least the sum of one item's
            large leaves, each rounded up to 64 bytes.
        count: Number of segments. Bounds the memory and the items in flight
            or held by the consumer; a worker that finds none free waits.
        acquire_timeout: Seconds a worker waits for a free segment before
            :func:`offload` raises :class:`feedline.Timeout` (a
            ``TimeoutError``); 0 does not wait.
    """

    _native = _ext._SharedArena

    def __init__(self, segment_size: int, count: int, *, acquire_timeout: float = 60.0) -> None:
        if segment_size <= 0:
            raise ValueError(f"segment_size must be positive, got {segment_size}")
        if count <= 0:
            raise ValueError(f"count must be positive, got {count}")
        super().__init__(acquire_timeout)
        self._handle = _ext._SharedArena.create(segment_size, count)

    @property
    def segment_size(self) -> int:
        """Bytes of each segment."""
        return int(self._live().segment_size)

    @property
    def count(self) -> int:
        """Number of segments."""
        return int(self._live().count)

    def free_segments(self) -> int:
        """Segments free now (neither being written nor held), in all processes."""
        return int(self._live().free_segments())

    def _begin_unit(self, timeout: float) -> Any:
        return _PoolUnit(self._live().begin_unit(timeout))

    def __repr__(self) -> str:
        if self._handle is None:
            return "SharedMemorySegmentPool(closed)"
        a = self._handle
        return f"SharedMemorySegmentPool(segment_size={a.segment_size}, count={a.count}, free={a.free_segments()})"


class _PoolUnit:
    """A pool segment being written: offsets within it, the segment as where."""

    def __init__(self, unit: Any) -> None:
        self._unit = unit

    def write(self, data: Any) -> int:
        return int(self._unit.write(data))

    def commit(self) -> tuple[int, int]:
        self._unit.commit()
        return self._unit.segment, 0

    def abort(self) -> None:
        self._unit.abort()


class _RingUnit:
    """A ring unit being written: positions in the ring, its span as where."""

    def __init__(self, unit: Any, timeout: float) -> None:
        self._unit = unit
        self._timeout = timeout

    def write(self, data: Any) -> int:
        return int(self._unit.write(data, self._timeout))

    def commit(self) -> tuple[int, int]:
        start, end = self._unit.commit()
        return int(start), int(end)

    def abort(self) -> None:
        self._unit.abort()


class SharedMemoryRingBuffer(_SharedMemory):
    """A shared-memory ring of ``capacity`` bytes that items are copied
    through: the worker copies an item's large leaves in, the parent copies
    them out into memory of its own and frees the item's bytes at once.

    Use it instead of :class:`SharedMemorySegmentPool` when item sizes vary
    widely (the ring holds only the bytes in flight, not a largest-item
    segment per item) or when the consumer keeps what it receives for long
    (copies pin nothing). One item must fit in the ring: about
    ``(buffer_size + 2) * largest item`` bytes keeps the worker from
    waiting. Pickles as a duplicate of the memory file's descriptor, as the
    pool does; nothing is ever left in ``/dev/shm``.

    Args:
        capacity: Bytes of the ring.
        acquire_timeout: Seconds a worker waits for room before
            :func:`offload` raises :class:`feedline.Timeout`; 0 does not wait.
    """

    _native = _ext._SharedRing

    def __init__(self, capacity: int, *, acquire_timeout: float = 60.0) -> None:
        if capacity <= 0:
            raise ValueError(f"capacity must be positive, got {capacity}")
        super().__init__(acquire_timeout)
        self._handle = _ext._SharedRing.create(capacity)

    @property
    def capacity(self) -> int:
        """Bytes of the ring."""
        return int(self._live().capacity)

    def used(self) -> int:
        """Bytes written and not yet restored or discarded, in all processes."""
        return int(self._live().used())

    def _begin_unit(self, timeout: float) -> Any:
        return _RingUnit(self._live().begin_unit(), timeout)

    def __repr__(self) -> str:
        if self._handle is None:
            return "SharedMemoryRingBuffer(closed)"
        return f"SharedMemoryRingBuffer(capacity={self._handle.capacity}, used={self._handle.used()})"


@functools.lru_cache(maxsize=64)
def _castable(fmt: Any) -> bool:
    """Whether ``memoryview.cast`` takes ``fmt`` (native single-character
    formats only)."""
    try:
        memoryview(b"").cast(fmt)
    except (TypeError, ValueError):
        return False
    return True


def _view_dtype(view: memoryview) -> Any:
    """None where the restored bytes can be cast back to ``view``'s format
    and shape; else the NumPy dtype that reads them (a non-native format
    such as big-endian ``'>i'`` or a structure, or a shape with a zero),
    so that the format and shape come back either way. A format NumPy
    cannot read is a TypeError here, not a flat view later."""
    if _castable(view.format) and 0 not in (view.shape or ()):
        return None
    try:
        return _np().asarray(view).dtype
    except (TypeError, ValueError) as e:
        raise TypeError(f"a memoryview of format {view.format!r} cannot cross shared memory ({e})") from e


def _shaped(view: memoryview, fmt: Any, shape: tuple, dtype: Any) -> memoryview:
    """The flat bytes ``view`` as the offloaded memoryview's format and shape."""
    if dtype is not None:
        return memoryview(_np().frombuffer(view, dtype).reshape(shape))
    if fmt == "B" and len(shape) == 1:
        return view
    return view.cast(fmt, shape)


# Types the pickler passes through at once: they are never moved themselves
# (the containers' items are asked about one by one).
_NEVER_MOVED = frozenset({tuple, list, dict, str, int, float, bool, type(None)})


def _dtype_field(dtype: Any) -> Any:
    """The marker's dtype: its ``str`` (``'<f4'``) where ``np.dtype()`` of that
    gives the same dtype back, else the dtype itself. A dtype object pickles
    through its reduce protocol, about twenty objects each passing
    ``persistent_id``: at 1 MiB that was a fifth of the writer's time. Kept
    as objects: structured and subarray dtypes, dtypes with metadata, and
    dtypes from outside NumPy (``ml_dtypes.bfloat16`` reads ``'<V2'``)."""
    if (
        dtype.names is None
        and dtype.subdtype is None
        and dtype.metadata is None
        and type(dtype).__module__ == "numpy.dtypes"
    ):
        return dtype.str
    return dtype


class _Offloader(pickle.Pickler):
    """Pickles an item, moving its large leaves into one unit of the pool."""

    def __init__(
        self,
        file: io.BytesIO,
        pool: SharedMemorySegmentPool | SharedMemoryRingBuffer,
        threshold: int,
        timeout: float,
    ) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._pool = pool
        self._threshold = threshold
        self._timeout = timeout
        self.unit: Any = None

    def _write(self, data: Any) -> int:
        if self.unit is None:
            self.unit = self._pool._begin_unit(self._timeout)
        return int(self.unit.write(data))

    def persistent_id(self, obj: Any) -> Any:  # noqa: PLR0911
        t = type(obj)
        if t in _NEVER_MOVED:
            return None
        if t is bytes or t is bytearray:
            if len(obj) < self._threshold:
                return None
            return ("b", self._write(obj), len(obj), t is bytearray)
        if t is memoryview:  # never picklable otherwise
            flat = obj if obj.c_contiguous else obj.tobytes()
            return ("m", self._write(flat), obj.nbytes, obj.format, obj.shape, _view_dtype(obj))
        if t is _io.Buffer:  # never picklable otherwise
            data = obj if _is_contiguous(obj) else _np().ascontiguousarray(obj)
            return ("f", self._write(data), obj.dtype, obj.shape)
        if isinstance(obj, _io.Packets) and not obj.consumed:
            blob = obj.serialize()
            if len(blob) < self._threshold:
                return None
            return ("p", self._write(blob), len(blob))
        np = sys.modules.get("numpy")
        if np is not None and t is np.ndarray:
            if obj.nbytes < self._threshold or obj.dtype.hasobject:
                return None
            flat = np.ascontiguousarray(obj).reshape(-1).view(np.uint8)
            return ("n", self._write(flat), _dtype_field(obj.dtype), obj.shape)
        torch = sys.modules.get("torch")
        if torch is not None and t is torch.Tensor:
            return self._tensor(obj, torch)
        return None

    def _tensor(self, t: Any, torch: Any) -> Any:
        if (
            t.device.type != "cpu"
            or t.layout != torch.strided
            or t.is_quantized
            or t.numel() * t.element_size() < self._threshold
        ):
            return None
        c = t.detach().resolve_conj().resolve_neg().contiguous()
        flat = c.reshape(-1).view(torch.uint8).numpy()
        dtype = str(t.dtype).removeprefix("torch.")
        return ("t", self._write(flat), dtype, tuple(t.shape), t.requires_grad)


class _Restorer(pickle.Unpickler):
    """Unpickles an envelope's item, viewing its leaves in the segment."""

    def __init__(self, file: io.BytesIO, arena: Any, lease: Any) -> None:
        super().__init__(file)
        self._arena = arena
        self._lease = lease

    def _bytes(self, offset: int, nbytes: int) -> Any:
        np = _np()
        arr = np.asarray(self._arena.view(self._lease, offset, "uint8", [nbytes]))
        arr.flags.writeable = False
        return arr

    def persistent_load(self, pid: Any) -> Any:
        kind = pid[0]
        if kind == "b":
            return memoryview(self._bytes(pid[1], pid[2]))
        if kind == "m":
            _, offset, nbytes, fmt, shape, dtype = pid
            return _shaped(memoryview(self._bytes(offset, nbytes)), fmt, shape, dtype)
        if kind == "f":
            _, offset, dtype, shape = pid
            return self._arena.view(self._lease, offset, dtype, list(shape))
        if kind == "p":  # the payloads stay in the segment, which they hold
            return _io.deserialize_packets(self._bytes(pid[1], pid[2]), True, "shared memory")
        if kind == "n":
            _, offset, dtype, shape = pid
            dtype = _np().dtype(dtype)
            nbytes = dtype.itemsize * _numel(shape)
            arr = _np().asarray(self._arena.view(self._lease, offset, "uint8", [nbytes]))
            return arr.view(dtype).reshape(shape)
        if kind == "t":
            import torch  # only items that carried a tensor need it

            _, offset, dtype, shape, requires_grad = pid
            nbytes = getattr(torch, dtype).itemsize * _numel(shape)
            arr = _np().asarray(self._arena.view(self._lease, offset, "uint8", [nbytes]))
            t = torch.from_numpy(arr).view(getattr(torch, dtype)).reshape(shape)
            return t.requires_grad_() if requires_grad else t
        raise pickle.UnpicklingError(f"unknown shared-memory marker {kind!r}")


class _RingRestorer(pickle.Unpickler):
    """Unpickles an envelope's item, copying its leaves out of the ring."""

    def __init__(self, file: io.BytesIO, ring: Any) -> None:
        super().__init__(file)
        self._ring = ring

    def _array(self, offset: int, nbytes: int) -> Any:
        return _np().asarray(self._ring.read(offset, "uint8", [nbytes]))

    def persistent_load(self, pid: Any) -> Any:
        kind = pid[0]
        if kind == "b":
            data = self._ring.read_bytes(pid[1], pid[2])
            return bytearray(data) if pid[3] else data
        if kind == "m":
            _, offset, nbytes, fmt, shape, dtype = pid
            return _shaped(memoryview(bytearray(self._ring.read_bytes(offset, nbytes))), fmt, shape, dtype)
        if kind == "f":
            _, offset, dtype, shape = pid
            return self._ring.read(offset, dtype, list(shape))
        if kind == "p":
            return _io.deserialize_packets(self._ring.read_bytes(pid[1], pid[2]), False, "shared memory")
        if kind == "n":
            _, offset, dtype, shape = pid
            dtype = _np().dtype(dtype)
            return self._array(offset, dtype.itemsize * _numel(shape)).view(dtype).reshape(shape)
        if kind == "t":
            import torch

            _, offset, dtype, shape, requires_grad = pid
            arr = self._array(offset, getattr(torch, dtype).itemsize * _numel(shape))
            t = torch.from_numpy(arr).view(getattr(torch, dtype)).reshape(shape)
            return t.requires_grad_() if requires_grad else t
        raise pickle.UnpicklingError(f"unknown shared-memory marker {kind!r}")


def _np() -> Any:
    import numpy

    return numpy


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _is_contiguous(buf: Any) -> bool:
    strides = buf.__array_interface__.get("strides")
    return strides is None


def offload(
    obj: Any,
    pool: SharedMemorySegmentPool | SharedMemoryRingBuffer,
    threshold: int = 4096,
    *,
    timeout: float | None = None,
) -> bytes:
    """Returns the envelope of ``obj``: its pickle, with every large leaf moved
    into one segment of ``pool`` (the writer's side; see the module doc).

    Leaves of ``threshold`` bytes or more are moved: ``bytes``, ``bytearray``,
    NumPy arrays (not of ``object`` dtype; non-contiguous ones are copied
    contiguous), CPU torch tensors (when torch is imported). ``memoryview``
    objects and feedline Buffers, which do not pickle, are moved whatever
    their size. An item without such leaves takes no segment. ``timeout``
    (seconds) overrides the pool's ``acquire_timeout`` for this call.

    Raises:
        feedline.Timeout: no segment freed within the pool's acquire_timeout.
        feedline.Cancelled: the pool was shut down.
        ValueError: the leaves do not fit in one segment.
    """
    if threshold < 1:
        raise ValueError(f"threshold must be >= 1, got {threshold}")
    out = io.BytesIO()
    out.write(_HEADER.pack(_NO_SEGMENT, 0))
    wait = pool.acquire_timeout if timeout is None else timeout
    pickler = _Offloader(out, pool, threshold, wait)
    try:
        pickler.dump(obj)
        if pickler.unit is None:
            return out.getvalue()
        where = pickler.unit.commit()
    except BaseException:
        if pickler.unit is not None:
            pickler.unit.abort()
        raise
    envelope = out.getbuffer()
    _HEADER.pack_into(envelope, 0, *where)
    del envelope
    return out.getvalue()


def restore(data: bytes, pool: SharedMemorySegmentPool | SharedMemoryRingBuffer) -> Any:
    """Returns the item of envelope ``data`` (the reader's side), its leaves
    viewing the segment, which is free again once they are all gone.

    Moved ``bytes``/``bytearray``/``memoryview`` leaves come back as read-only
    memoryviews, NumPy arrays as writable arrays of the same dtype and shape,
    tensors as tensors, Buffers as Buffers. From a
    :class:`SharedMemoryRingBuffer` every leaf is a copy of its own (bytes
    and bytearrays keep their type, memoryviews are writable) and the item's
    bytes in the ring are free when this returns.
    """
    segment, end = _HEADER.unpack_from(data)
    body = io.BytesIO(memoryview(data)[_HEADER.size :])
    if segment == _NO_SEGMENT:
        return pickle.load(body)
    if isinstance(pool, SharedMemoryRingBuffer):
        ring = pool._live()
        try:
            return _RingRestorer(body, ring).load()
        finally:
            ring.release(end)
    arena = pool._live()
    lease = arena.adopt(segment)
    return _Restorer(body, arena, lease).load()


def discard(data: bytes, pool: SharedMemorySegmentPool | SharedMemoryRingBuffer) -> None:
    """Frees the memory of an envelope that will never be restored (an item
    dropped in flight at shutdown or when iteration stops early)."""
    segment, end = _HEADER.unpack_from(data)
    if segment == _NO_SEGMENT:
        return
    if isinstance(pool, SharedMemoryRingBuffer):
        pool._live().release(end)
    else:
        pool._live().adopt(segment)
