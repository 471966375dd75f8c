// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: list_zip() and read_zip_entry() (with a 1 MiB member
// limit) on arbitrary bytes, then load_npy() on each member, as load_npz does.
#include "feedline/io/formats.h"
#include "io_fuzzers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  feedline::fuzz::run(data, size, [](const feedline::Buffer& b) {
    std::span<const uint8_t> bytes(b.data_as<const uint8_t>(), b.nbytes());
    for (const feedline::ZipEntry& e : feedline::list_zip(bytes, "fuzz")) {
      try {
        feedline::Buffer member =
            feedline::read_zip_entry(b, e, "fuzz", 1 << 20);
        feedline::load_npy(member, "fuzz member");
      } catch (const feedline::FormatError&) {
      }
    }
  });
  return 0;
}
