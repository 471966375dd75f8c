// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: parse_wav() and load_wav() (whole, and a window) on
// arbitrary bytes.
#include "feedline/io/formats.h"
#include "io_fuzzers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  feedline::fuzz::run(data, size, [](const feedline::Buffer& b) {
    feedline::Buffer all = feedline::load_wav(b, "fuzz");
    volatile int64_t n = all.numel();
    (void)n;
    feedline::load_wav(b, "fuzz", 3, 5);
  });
  return 0;
}
