// SPDX-License-Identifier: Apache-2.0
//
// The seam between Python values and native Items, in both directions.
//
// One registry maps native item types to converters: to_python() turns an
// Item into a Python object when it reaches a Python op or the consumer, and
// from_python() turns a Python object into the native type a native op asks
// for. A Python value travels as a PyObj item and is never converted between
// Python stages; a native value is never converted between native stages.
// Binding areas register converters for their types at module import, before
// any pipeline runs; the registry is read-only afterwards, so lookups need no
// lock.
//
// Also here: PythonError, the C++ form of an exception raised by Python code
// that ran inside the engine, and the conversion of any engine failure back to
// a Python exception object.

#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <typeinfo>

#include <nanobind/nanobind.h>

#include "feedline/base/error.h"
#include "feedline/ops/samples.h"
#include "feedline/pipeline/item.h"
#include "feedline/pipeline/op.h"
#include "py_ref.h"

namespace feedline::bindings {

// A duration in seconds from Python (a timeout, an interval), capped at 1e9 s.
// Throws: InvalidArgument if negative or NaN.
std::chrono::nanoseconds seconds_to_ns(double seconds);

// A Python exception raised by user code (an op, a source, a hook) inside the
// engine. It keeps the exception object, traceback included, so that the
// consumer gets exactly what the op raised. what() is "Type: message (at
// file:line in function)", computed once when it is caught.
class PythonError : public Error {
 public:
  PythonError(PyObj exception, const std::string& what)
      : Error(what),
        exception_(std::make_shared<PyObj>(std::move(exception))) {}
  // The exception object (borrowed); null once released.
  PyObject* exception() const { return exception_->get(); }
  // Drops the exception object, in every copy of this error; what() stays.
  // Requires: the GIL.
  void release_exception() const { exception_->reset(); }

 private:
  std::shared_ptr<PyObj> exception_;  // shared: exceptions are copied
};

// Returns the PythonError for exception object `exc`. Requires: the GIL.
PythonError python_error_from(nanobind::handle exc);

// Takes the Python exception that is set and throws it as a PythonError.
// Requires: the GIL, and a Python error indicator that is set.
[[noreturn]] void throw_python_error();

// Returns a Python exception object for `error`: the original object for a
// PythonError, else an instance of the class the C++ type maps to
// (feedline.DecodeError, ValueError, ...). A TooManyFailures gets the error
// that exceeded the budget as __cause__; a PipelineFailure becomes a
// feedline.PipelineFailure group of its stages' exceptions. Requires: the GIL.
nanobind::object to_python_exception(const std::exception_ptr& error);

// Sets the Python error indicator to to_python_exception(error).
// Requires: the GIL.
void set_python_error(const std::exception_ptr& error);

// Drops the Python exception objects held by `error` (its PythonErrors, also
// inside a PipelineFailure or as a TooManyFailures' cause), which keeps only
// their text. Used once `error` has been handed to Python: the engine keeps
// the failure of a stopped pipeline, and references it held to Python
// objects would be invisible to the garbage collector. Requires: the GIL.
void release_python_objects(const std::exception_ptr& error);

// Registers native item type `type`: its converters (either may be null) and
// its Python-facing name for messages ("int", "feedline.io.Buffer"), which
// feedline::register_type_name() gives engine messages too; type_name()
// returns it.
using ToPythonFn = nanobind::object (*)(Item& item);
using FromPythonFn = Item (*)(nanobind::handle obj);
void register_type(const std::type_info& type, const char* name,
                   ToPythonFn to = nullptr, FromPythonFn from = nullptr);
bool can_convert_from_python(const std::type_info& type);

// A ToPythonFn: the object nanobind casts the item's T to (moved out).
template <typename T>
nanobind::object cast_to_python(Item& item) {
  return nanobind::cast(std::move(item.as<T>()));
}

// Converts `item` (consumed) to a Python object; an empty item is None.
// Throws: InvalidArgument if no converter knows the type. Requires: the GIL.
nanobind::object to_python(Item&& item);

// Converts `obj` to a native item of type `wanted` (which may also be PyObj:
// then the object itself). Throws: InvalidArgument naming both types when the
// object does not convert. Requires: the GIL.
Item from_python(nanobind::handle obj, const std::type_info& wanted);

// from_python(obj, wanted); for a tuple or dict `obj` and a `field`, an
// ops::Sample of `obj` with its `field` converted (a missing field raises
// feedline/_samples.py's ValueError). Requires: the GIL.
Item value_from_python(nanobind::handle obj, const std::type_info& wanted,
                       const ops::Field* field);

// Conversions done so far, for tests that check where the seam is crossed.
struct ConversionCounts {
  std::atomic<uint64_t> to_python{0};
  std::atomic<uint64_t> from_python{0};
};
ConversionCounts& conversion_counts();

// Registers the converters of the basic types: int (int64_t), float
// (double), bool, str (std::string), and list (ItemBatch, converted element by
// element). Called once at module import.
void register_basic_converters();

}  // namespace feedline::bindings
