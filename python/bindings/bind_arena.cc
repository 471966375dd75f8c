// SPDX-License-Identifier: Apache-2.0
//
// The shared-memory arena (feedline/concurrency/shared_arena.h) as the
// private classes _SharedArena, _ArenaUnit and _ArenaLease, which
// feedline.pipeline._arena builds SharedMemorySegmentPool on.
//
// GIL: released while begin_unit() waits for a free segment and while
// write() copies; the copy reads the source through a buffer export held
// for the call, so a bytearray cannot be resized under it.

#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "feedline/base/buffer.h"
#include "feedline/base/error.h"
#include "feedline/concurrency/shared_arena.h"

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

// Copies the bytes of a bytes-like object or a contiguous Buffer into the
// unit, with the GIL released for the copy.
uint64_t write_bytes(Unit& unit, nb::handle data) {
  const Buffer bytes = bytes_from_python(data);
  if (!bytes.contiguous())
    throw InvalidArgument("write: the Buffer is not contiguous (" +
                          bytes.to_string() + ")");
  nb::gil_scoped_release release;
  return unit.write(bytes.data(), bytes.nbytes());
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
            nb::gil_scoped_release release;
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
}

}  // namespace feedline::bindings
