// SPDX-License-Identifier: Apache-2.0
//
// Python classes for the C++ exception hierarchy of feedline/base/error.h.
//
// feedline::Error becomes feedline.Error (a RuntimeError) and each subclass a
// Python subclass of it; Timeout is also a TimeoutError, so callers can catch
// it either way. InvalidArgument and OutOfRange derive from
// std::invalid_argument and std::out_of_range, which nanobind already
// translates to ValueError and IndexError, so they need nothing here; but
// media::ObjectConsumed (a consumed Packets or Frames) is a TypeError.

#include <exception>

#include <nanobind/nanobind.h>

#include "bindings.h"
#include "convert.h"
#include "feedline/base/error.h"
#include "feedline/media/av.h"

namespace nb = nanobind;

namespace feedline::bindings {
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

}  // namespace feedline::bindings
