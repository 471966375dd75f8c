// SPDX-License-Identifier: Apache-2.0
//
// Entry point of the extension module feedline._feedline_ext (private: users
// import `feedline`, which re-exports what is public), with the module-wide
// pieces: the exception classes and the ExtensionApi capsule.
//
// Exceptions: feedline::Error becomes feedline.Error (a RuntimeError) and
// each subclass a Python subclass of it; Timeout is also a TimeoutError.
// InvalidArgument and OutOfRange derive from std::invalid_argument and
// std::out_of_range, which nanobind translates to ValueError and IndexError;
// media::ObjectConsumed (a consumed Packets or Frames) is a TypeError.
//
// The capsule `_extension_api` publishes the ExtensionApi table
// (feedline/pipeline/extension_api.h) through which other extension modules
// hand native ops and sources to feedline.

#include <exception>
#include <string>
#include <typeinfo>
#include <utility>

#include <nanobind/nanobind.h>

#include "bindings.h"
#include "convert.h"
#include "feedline/base/error.h"
#include "feedline/media/av.h"
#include "feedline/pipeline/extension_api.h"

#ifndef FEEDLINE_VERSION
#error "FEEDLINE_VERSION is set by python/bindings/CMakeLists.txt"
#endif

namespace nb = nanobind;

namespace feedline::bindings {
namespace {

// Runs `f`, which returns a new Python object; on failure returns null with
// the Python error indicator set, as a bound function would.
template <typename F>
PyObject* guarded(F f) {
  try {
    return f().release().ptr();
  } catch (nb::python_error& e) {
    e.restore();
  } catch (...) {
    set_python_error(std::current_exception());
  }
  return nullptr;
}

PyObject* wrap_op(OpPtr op, const char* name) {
  return guarded([&] {
    if (op == nullptr) throw InvalidArgument("wrap_op: null op");
    return nb::cast(NativeOp{std::move(op), name});
  });
}

PyObject* wrap_source(SourceFactory factory, const char* name,
                      const std::type_info* output) {
  return guarded([&] {
    if (!factory) throw InvalidArgument("wrap_source: empty factory");
    return nb::cast(NativeSource{std::move(factory), name, output});
  });
}

void bind_errors(nb::module_& m) {
  // nanobind tries the most recently registered translator first, so the
  // base class must be registered before its subclasses.
  nb::exception<Error> error(m, "Error", PyExc_RuntimeError);
  nb::exception<IoError>(m, "IoError", error);
  nb::exception<FormatError>(m, "FormatError", error);
  nb::exception<DecodeError> decode_error(m, "DecodeError", error);
  nb::exception<UnsupportedFormat>(m, "UnsupportedFormat", decode_error);
  nb::exception<Cancelled>(m, "Cancelled", error);
  nb::exception<Internal>(m, "Internal", error);
  nb::exception<Timeout>(m, "Timeout",
                         nb::make_tuple(error, nb::handle(PyExc_TimeoutError)));
  nb::exception<TooManyFailures>(m, "TooManyFailures", error);
  // PipelineFailure is an ExceptionGroup of each failed stage's exception,
  // defined in Python (feedline/_errors.py) so that except* and split() keep
  // the class; to_python_exception() builds it.
  nb::register_exception_translator(
      [](const std::exception_ptr& p, void* /*payload*/) {
        try {
          std::rethrow_exception(p);
        } catch (const PipelineFailure&) {
          set_python_error(p);
        } catch (const media::ObjectConsumed& e) {
          PyErr_SetString(PyExc_TypeError, e.what());
        }
      });
}

void bind_extension_api(nb::module_& m) {
  static const ExtensionApi kApi{
      kExtensionAbiVersion,
      &wrap_op,
      &wrap_source,
      &conversion_counts().to_python,
      &conversion_counts().from_python,
  };
  // The capsule's name must be the full dotted path for PyCapsule_Import().
  m.attr("_extension_api") =
      nb::capsule(static_cast<const void*>(&kApi), kExtensionApiCapsule);
}

}  // namespace
}  // namespace feedline::bindings

NB_MODULE(_feedline_ext, m) {
  using namespace feedline::bindings;  // NOLINT(google-build-using-namespace)
  m.doc() = "Native core of feedline (private; import feedline instead).";
  m.attr("__version__") = FEEDLINE_VERSION;
  m.attr("_build_type") = FEEDLINE_BUILD_TYPE;  // CMake config: "Debug", ...

  register_basic_converters();
  bind_errors(m);
  bind_stats(m);
  bind_pipeline(m);
  bind_spec(m);
  bind_io(m);
  bind_arena(m);
  bind_extension_api(m);
}
