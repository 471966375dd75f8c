// SPDX-License-Identifier: Apache-2.0
//
// How another extension module hands native ops and sources to feedline.
//
// feedline._feedline_ext publishes one PyCapsule, the attribute
// `_extension_api`, that holds a `const feedline::ExtensionApi*`. An
// extension that implements engine ops (feedline::Op subclasses or
// feedline::make_map_op()) gets the table once, at its own import:
//
//   auto* api = static_cast<const feedline::ExtensionApi*>(
//       PyCapsule_Import(feedline::kExtensionApiCapsule, 0));
//   if (api == nullptr || api->abi_version != feedline::kExtensionAbiVersion)
//     ... fail the import ...
//
// and wraps each op with wrap_op(); the result is a feedline NativeOp that
// pipes into PipelineBuilder like those of feedline.io.ops, converted at the
// seam by feedline's own converter registry.
//
// The table passes C++ objects (OpPtr, SourceFactory), so the two modules
// must be compiled against the same feedline headers, with the same compiler
// and standard library. Item types are matched by std::type_info, which the
// Itanium C++ ABI implementations of Linux compare by mangled name across
// shared objects; item types must therefore have external linkage (no types
// in anonymous namespaces). The table has no Python.h dependency beyond the
// PyObject declaration.

#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <typeinfo>

#include "feedline/pipeline/op.h"
#include "feedline/pipeline/spec.h"

// CPython's object type, declared as Python.h does, so this header needs no
// Python include path.
struct _object;
using PyObject = _object;

namespace feedline {

inline constexpr const char* kExtensionApiCapsule =
    "feedline._feedline_ext._extension_api";

// Raised when the layout of ExtensionApi changes.
inline constexpr uint32_t kExtensionAbiVersion = 1;

struct ExtensionApi {
  uint32_t abi_version;

  // Returns a new reference to a feedline NativeOp handle for `op`, named
  // `name`; its input and output types are op->input_type() and
  // op->output_type(). Returns null with a Python exception set on failure.
  // Requires: the GIL.
  PyObject* (*wrap_op)(OpPtr op, const char* name);

  // Returns a new reference to a feedline NativeSource handle for `factory`,
  // whose items have type `output` (null: unknown). Returns null with a
  // Python exception set on failure. Requires: the GIL.
  PyObject* (*wrap_source)(SourceFactory factory, const char* name,
                           const std::type_info* output);

  // Conversions across the native/Python seam so far, native -> Python and
  // Python -> native (a diagnostic: lets an op's tests check where the seam
  // is crossed).
  const std::atomic<uint64_t>* to_python_count;
  const std::atomic<uint64_t>* from_python_count;
};

}  // namespace feedline
