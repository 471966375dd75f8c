// SPDX-License-Identifier: Apache-2.0
//
// Publishes the ExtensionApi table (feedline/pipeline/extension_api.h) as the
// capsule feedline._feedline_ext._extension_api.

#include <exception>
#include <memory>
#include <string>
#include <typeinfo>
#include <utility>

#include <nanobind/nanobind.h>

#include "bindings.h"
#include "convert.h"
#include "feedline/pipeline/extension_api.h"

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
    return nb::cast(native_op(std::move(op), name));
  });
}

PyObject* wrap_source(SourceFactory factory, const char* name,
                      const std::type_info* output) {
  return guarded([&] {
    if (!factory) throw InvalidArgument("wrap_source: empty factory");
    return nb::cast(NativeSource{std::move(factory), name, output});
  });
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
