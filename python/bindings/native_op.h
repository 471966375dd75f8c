// SPDX-License-Identifier: Apache-2.0
//
// The Python handles of native ops and native sources.
//
// A binding area that offers a native op (feedline.io.ops.decode_image, ...)
// returns a NativeOp: the engine op plus what it takes and gives. The Python
// PipelineBuilder recognises the handle and installs the op directly, so the
// op runs without the GIL and passes native items on unconverted.

#pragma once

#include <string>
#include <typeinfo>

#include <nanobind/nanobind.h>

#include "feedline/pipeline/op.h"
#include "feedline/pipeline/spec.h"

namespace feedline::bindings {

struct NativeOp {
  OpPtr op;
  std::string name;
  // The native type the op takes; Python values are converted to it. Null:
  // the op takes any item as it is.
  const std::type_info* input = nullptr;
  // The native type the op produces. Null: the same type it was given.
  const std::type_info* output = nullptr;
};

struct NativeSource {
  SourceFactory factory;
  std::string name;
  const std::type_info* output = nullptr;  // null: unknown
};

// Binds NativeOp and NativeSource (feedline.pipeline.NativeOp / NativeSource).
void bind_native_op(nanobind::module_& m);

}  // namespace feedline::bindings
