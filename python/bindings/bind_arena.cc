// SPDX-License-Identifier: Apache-2.0
//
// The shared-memory arena (feedline/concurrency/shared_arena.h) as the
// private classes _SharedArena, _ArenaUnit and _ArenaLease, which
// feedline.pipeline._arena builds SharedMemorySegmentPool on, and the ring
// (shared_ring.h) as _SharedRing and _RingUnit, for SharedMemoryRingBuffer.
//
// GIL: released while begin_unit() waits for a free segment, while write()
// waits for room and copies, and while read() copies; the copy reads the source
// through a buffer export held for the call, so a bytearray cannot be resized
// under it.

#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "feedline/base/buffer.h"
#include "feedline/base/error.h"
#include "feedline/concurrency/shared_arena.h"
#include "feedline/concurrency/shared_ring.h"

namespace nb = nanobind;

namespace feedline::bindings {
namespace {

using Unit = SharedArena::Unit;

// A lease of adopted segment memory (opaque to Python); every Buffer that
// view() makes of it shares it.
struct ArenaLease {
  std::shared_ptr<const void> lease;
};

std::chrono::nanoseconds timeout_from(double seconds) {
  if (std::isnan(seconds) || seconds < 0)
    throw InvalidArgument("timeout must be >= 0 seconds (got " +
                          std::to_string(seconds) + ")");
  if (seconds > 1e9) return std::chrono::nanoseconds::max();
  return std::chrono::nanoseconds(static_cast<int64_t>(seconds * 1e9));
}

// The bytes of a bytes-like object or a contiguous Buffer.
Buffer contiguous_bytes(nb::handle data) {
  Buffer bytes = bytes_from_python(data);
  if (!bytes.contiguous())
    throw InvalidArgument("write: the Buffer is not contiguous (" +
                          bytes.to_string() + ")");
  return bytes;
}

// Copies the bytes of `data` into the unit, with the GIL released for the
// copy.
uint64_t write_bytes(Unit& unit, nb::handle data) {
  const Buffer bytes = contiguous_bytes(data);
  ReleaseGil release;
  return unit.write(bytes.data(), bytes.nbytes());
}

uint64_t write_ring(SharedRing::Unit& unit, nb::handle data, double timeout) {
  const Buffer bytes = contiguous_bytes(data);
  const auto ns = timeout_from(timeout);
  ReleaseGil release;
  return unit.write(bytes.data(), bytes.nbytes(), ns);
}

// A bytes object holding `n` bytes of the ring at `offset` (one copy).
nb::bytes read_ring_bytes(const SharedRing& ring, uint64_t offset,
                          std::size_t n) {
  if (n > ring.capacity())  // checked again, fully, by read_into()
    throw OutOfRange("shared ring: read: " + std::to_string(n) +
                     " bytes do not fit in a ring of " +
                     std::to_string(ring.capacity()) + " bytes");
  nb::bytes out(nullptr, n);  // not yet shared: filled without the GIL
  char* dst = const_cast<char*>(out.c_str());
  {
    ReleaseGil release;
    ring.read_into(offset, n, dst);
  }
  return out;
}

}  // namespace

void bind_arena(nb::module_& m) {
  nb::class_<ArenaLease>(m, "_ArenaLease",
                         "An adopted segment; free again once this and "
                         "every view of it are gone.");

  nb::class_<Unit>(m, "_ArenaUnit", "One segment being written.")
      .def_prop_ro("segment", &Unit::segment)
      .def_prop_ro("used", &Unit::used)
      .def_prop_ro("active", &Unit::active)
      .def("write", &write_bytes, nb::arg("data"),
           "Copies a bytes-like object to the next 64-byte-aligned offset; "
           "returns the offset.")
      .def("commit", &Unit::commit, "Publishes the unit; returns bytes used.")
      .def("abort", &Unit::abort, "Frees the segment unpublished.");

  nb::class_<SharedArena>(m, "_SharedArena",
                          "Shared-memory segments in one anonymous file.")
      .def_static("create", &SharedArena::create, nb::arg("segment_size"),
                  nb::arg("count"))
      .def_static("attach", &SharedArena::attach, nb::arg("fd"),
                  "Maps the arena of `fd` (duplicated; the caller keeps fd).")
      .def_prop_ro("fd", &SharedArena::fd)
      .def_prop_ro("segment_size", &SharedArena::segment_size)
      .def_prop_ro("count", &SharedArena::count)
      .def_prop_ro("is_shutdown", &SharedArena::is_shutdown)
      .def("free_segments", &SharedArena::free_segments)
      .def(
          "begin_unit",
          [](SharedArena& a, double timeout) {
            const auto ns = timeout_from(timeout);
            ReleaseGil release;
            return a.begin_unit(ns);
          },
          nb::arg("timeout"),
          "Takes a free segment, waiting up to `timeout` seconds.")
      .def(
          "adopt",
          [](SharedArena& a, uint32_t segment) {
            return ArenaLease{a.adopt(segment)};
          },
          nb::arg("segment"))
      .def(
          "view",
          [](const SharedArena& a, const ArenaLease& lease, uint64_t offset,
             const std::string& dtype, std::vector<int64_t> shape) {
            return a.view(lease.lease, offset, dtype_from_name(dtype),
                          std::move(shape));
          },
          nb::arg("lease"), nb::arg("offset"), nb::arg("dtype"),
          nb::arg("shape"))
      .def("shutdown", &SharedArena::shutdown);

  nb::class_<SharedRing::Unit>(m, "_RingUnit", "One unit being written.")
      .def_prop_ro("start", &SharedRing::Unit::start)
      .def_prop_ro("size", &SharedRing::Unit::size)
      .def_prop_ro("active", &SharedRing::Unit::active)
      .def("write", &write_ring, nb::arg("data"), nb::arg("timeout"),
           "Copies a bytes-like object after the unit's last bytes, waiting "
           "up to `timeout` seconds for room; returns its position.")
      .def("commit", &SharedRing::Unit::commit,
           "Publishes the unit; returns its span (start, end).")
      .def("abort", &SharedRing::Unit::abort);

  nb::class_<SharedRing>(m, "_SharedRing",
                         "A shared-memory byte ring in one anonymous file.")
      .def_static("create", &SharedRing::create, nb::arg("capacity"))
      .def_static("attach", &SharedRing::attach, nb::arg("fd"),
                  "Maps the ring of `fd` (duplicated; the caller keeps fd).")
      .def_prop_ro("fd", &SharedRing::fd)
      .def_prop_ro("capacity", &SharedRing::capacity)
      .def_prop_ro("is_shutdown", &SharedRing::is_shutdown)
      .def("used", &SharedRing::used)
      .def("begin_unit", &SharedRing::begin_unit)
      .def(
          "read",
          [](const SharedRing& r, uint64_t offset, const std::string& dtype,
             std::vector<int64_t> shape) {
            const DType t = dtype_from_name(dtype);
            ReleaseGil release;
            return r.read(offset, t, std::move(shape));
          },
          nb::arg("offset"), nb::arg("dtype"), nb::arg("shape"),
          "A private copy of the elements at `offset`.")
      .def("read_bytes", &read_ring_bytes, nb::arg("offset"), nb::arg("n"))
      .def("release", &SharedRing::release, nb::arg("end"))
      .def("shutdown", &SharedRing::shutdown);
}

}  // namespace feedline::bindings
