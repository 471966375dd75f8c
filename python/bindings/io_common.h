// SPDX-License-Identifier: Apache-2.0
//
// What the feedline.io binding files share: encoded files travelling through
// pipelines, bytes-like Python objects as Buffers, and loader ops.

#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include <nanobind/nanobind.h>

#include "feedline/base/buffer.h"
#include "feedline/pipeline/op.h"
#include "native_op.h"

namespace feedline::bindings {

// An encoded file travelling through a pipeline: its name (for errors) and
// its bytes.
struct EncodedFile {
  std::string name;
  Buffer bytes;
};

inline std::span<const uint8_t> span_of(const Buffer& b) {
  return {b.data_as<const uint8_t>(), b.nbytes()};
}

// A bytes-like Python object as a 1-D uint8 Buffer, read in place where it
// can be (see bind_io.cc). Requires the GIL.
Buffer bytes_from_python(nanobind::handle obj);

// A loader op: encoded bytes (an EncodedFile from read_file or an archive
// op, or Python bytes) -> the Buffer `load` makes of them.
class LoadOp final : public MapOp {
 public:
  using Load = std::function<Buffer(const EncodedFile&)>;
  explicit LoadOp(Load load) : load_(std::move(load)) {}
  Item call(Item input) override {
    return Item(load_(input.as<EncodedFile>()));
  }

 private:
  const Load load_;
};

NativeOp load_op(std::string name, LoadOp::Load load);

void bind_av(nanobind::module_& io);

}  // namespace feedline::bindings
