// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: load_npy() on arbitrary bytes.
#include "feedline/io/formats.h"
#include "io_fuzzers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  feedline::fuzz::run(data, size, [](const feedline::Buffer& b) {
    feedline::Buffer a = feedline::load_npy(b, "fuzz");
    volatile int64_t n = a.numel();
    (void)n;
  });
  return 0;
}
