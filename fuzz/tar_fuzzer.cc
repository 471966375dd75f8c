// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: list_tar() on arbitrary bytes; every member it reports
// must lie inside the input.
#include <cstdlib>

#include "feedline/io/formats.h"
#include "io_fuzzers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  feedline::fuzz::run(data, size, [size](const feedline::Buffer& b) {
    std::span<const uint8_t> bytes(b.data_as<const uint8_t>(), b.nbytes());
    for (const feedline::TarMember& m : feedline::list_tar(bytes, "fuzz")) {
      if (m.offset > size || m.size > size - m.offset) std::abort();
    }
  });
  return 0;
}
