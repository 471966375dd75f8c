// SPDX-License-Identifier: Apache-2.0
//
// What the feedline.io binding files share: bytes-like Python objects as
// Buffers, and the NativeOp handle of a feedline::ops op.

#pragma once

#include <string>
#include <utility>

#include <nanobind/nanobind.h>

#include "feedline/base/buffer.h"
#include "feedline/pipeline/op.h"
#include "native_op.h"

namespace feedline::bindings {

// A bytes-like Python object as a 1-D uint8 Buffer, read in place where it
// can be (see bind_io.cc). Requires the GIL.
Buffer bytes_from_python(nanobind::handle obj);

// The Python handle of `op`, with the types it declares.
inline NativeOp native_op(OpPtr op, std::string name) {
  const std::type_info* in = op->input_type();
  const std::type_info* out = op->output_type();
  return NativeOp{std::move(op), std::move(name), in, out};
}

void bind_av(nanobind::module_& io);

}  // namespace feedline::bindings
