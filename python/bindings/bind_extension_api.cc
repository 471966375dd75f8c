// SPDX-License-Identifier: Apache-2.0
//
// Publishes the ExtensionApi table (extension_api.h) as the capsule
// feedline._feedline_ext._extension_api.

#include <exception>
#include <memory>
#include <string>
#include <typeinfo>
#include <utility>

#include <nanobind/nanobind.h>

#include "bindings.h"
#include "convert.h"
#include "extension_api.h"
#include "native_op.h"

namespace nb = nanobind;

namespace feedline::bindings {
namespace {

// Turns a C++ exception into the Python error indicator, as nanobind does
// for a bound function (exception translators included).
PyObject* set_error(const std::exception_ptr& error) {
  nb::object exc = to_python_exception(error);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  return nullptr;
}

PyObject* wrap_op(OpPtr op, const char* name) {
  try {
    if (op == nullptr) throw InvalidArgument("wrap_op: null op");
    const std::type_info* input = op->input_type();
    const std::type_info* output = op->output_type();
    return nb::cast(NativeOp{std::move(op), name, input, output})
        .release()
        .ptr();
  } catch (nb::python_error& e) {
    e.restore();
    return nullptr;
  } catch (...) {
    return set_error(std::current_exception());
  }
}

PyObject* wrap_source(SourceFactory factory, const char* name,
                      const std::type_info* output) {
  try {
    if (!factory) throw InvalidArgument("wrap_source: empty factory");
    return nb::cast(NativeSource{std::move(factory), name, output})
        .release()
        .ptr();
  } catch (nb::python_error& e) {
    e.restore();
    return nullptr;
  } catch (...) {
    return set_error(std::current_exception());
  }
}

}  // namespace

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

}  // namespace feedline::bindings
