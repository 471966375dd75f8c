// SPDX-License-Identifier: Apache-2.0
//
// The Python handles of native ops and sources (native_op.h).

#include "native_op.h"

#include <optional>
#include <string>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "convert.h"

namespace nb = nanobind;

namespace feedline::bindings {

void bind_native_op(nb::module_& m) {
  nb::class_<NativeOp>(
      m, "NativeOp",
      "A pipeline op implemented in C++. Pass it to PipelineBuilder.pipe(): "
      "it\n"
      "runs without the GIL and passes native items on without converting\n"
      "them to Python objects.")
      .def_ro("name", &NativeOp::name)
      .def_prop_ro("kind",
                   [](const NativeOp& op) {
                     switch (op.op->kind()) {
                       case OpKind::kMap:
                         return "map";
                       case OpKind::kGenerator:
                         return "generator";
                       case OpKind::kAsync:
                         return "async";
                     }
                     return "map";
                   })
      .def_prop_ro(
          "input_type",
          [](const NativeOp& op) -> std::optional<std::string> {
            if (op.input == nullptr) return std::nullopt;
            return python_type_name(*op.input);
          },
          "Name of the native type the op takes; None: any item.")
      .def_prop_ro(
          "output_type",
          [](const NativeOp& op) -> std::optional<std::string> {
            if (op.output == nullptr) return std::nullopt;
            return python_type_name(*op.output);
          },
          "Name of the native type the op produces; None: what it was given.")
      .def("__repr__", [](const NativeOp& op) {
        std::string in = op.input ? python_type_name(*op.input) : "any";
        std::string out = op.output ? python_type_name(*op.output) : in;
        return "NativeOp(" + op.name + ": " + in + " -> " + out + ")";
      });
  nb::class_<NativeSource>(
      m, "NativeSource",
      "A pipeline source implemented in C++; pass it to add_source().")
      .def_ro("name", &NativeSource::name)
      .def("__repr__", [](const NativeSource& s) {
        return "NativeSource(" + s.name + ")";
      });
}
}  // namespace feedline::bindings
