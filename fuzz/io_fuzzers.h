// SPDX-License-Identifier: Apache-2.0
//
// Shared body of the parser fuzz targets: wrap the input in a Buffer (as the
// Python layer does) and run `parse`; a FormatError is an expected outcome,
// anything else (a crash, a sanitizer report, another exception) a finding.

#pragma once

#include <cstdint>
#include <cstring>
#include <memory>

#include "feedline/base/buffer.h"
#include "feedline/base/error.h"

namespace feedline::fuzz {

// A copy in a heap block of exactly `size` bytes, so that ASan catches any
// read past the end.
inline Buffer exact_copy(const uint8_t* data, size_t size) {
  std::shared_ptr<uint8_t[]> copy(new uint8_t[size == 0 ? 1 : size]);
  if (size > 0) std::memcpy(copy.get(), data, size);
  return Buffer::view(std::shared_ptr<const void>(copy, copy.get()), copy.get(),
                      DType::kUint8, {static_cast<int64_t>(size)});
}

template <typename F>
void run(const uint8_t* data, size_t size, F&& parse) {
  try {
    parse(exact_copy(data, size));
  } catch (const FormatError&) {
  }
}

}  // namespace feedline::fuzz
