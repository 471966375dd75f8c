// SPDX-License-Identifier: Apache-2.0
//
// libFuzzer target: media::deserialize_packets, copied and in place, and
// media::deserialize_frames on the same bytes. A
// string that reads back must serialize to a string that reads back the
// same way (the same bytes again), and its packets must go through a
// clone and a bit-stream filter; damaged strings must raise FormatError.
// Anything else (a crash, a sanitizer report, another exception) is a
// finding.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "feedline/base/buffer.h"
#include "feedline/base/error.h"
#include "feedline/base/log.h"
#include "feedline/media/av.h"

namespace {

using feedline::Buffer;
using feedline::DType;

Buffer copy_of(const uint8_t* data, size_t size) {
  Buffer b = Buffer::allocate(DType::kUint8, {static_cast<int64_t>(size)});
  if (size > 0) std::memcpy(b.data_as<uint8_t>(), data, size);
  return b;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  feedline::set_log_level(feedline::LogLevel::kError);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An exact-size copy, so that ASan sees any read past the end.
  const Buffer blob = copy_of(data, size);
  for (bool view : {true, false}) {
    std::unique_ptr<feedline::media::Packets> packets;
    try {
      packets = feedline::media::deserialize_packets(blob, view, "fuzz");
    } catch (const feedline::FormatError&) {
      continue;
    }
    const Buffer again = feedline::media::serialize_packets(*packets);
    auto back = feedline::media::deserialize_packets(again, view, "again");
    const Buffer third = feedline::media::serialize_packets(*back);
    if (third.nbytes() != again.nbytes() ||
        std::memcmp(third.data(), again.data(), again.nbytes()) != 0) {
      std::abort();  // a string that does not read back as written
    }
    volatile std::size_t text = back->to_string().size();
    (void)text;
    for (std::size_t i = 0; i < back->num_packets(); ++i) {
      volatile std::size_t n = back->packet(i).data.size();
      (void)n;
    }
    auto clone = back->clone();
    if (clone->codec()) {
      try {
        auto out = feedline::media::apply_bsf(std::move(*clone), "null");
        volatile std::size_t n = out->num_packets();
        (void)n;
      } catch (const feedline::InvalidArgument&) {
        // Parameters the filter refuses (a codec it cannot open).
      } catch (const feedline::DecodeError&) {
      }
    }
  }
  // The same bytes as serialized frames.
  try {
    auto frames = feedline::media::deserialize_frames(blob, "fuzz");
    const Buffer again = feedline::media::serialize_frames(*frames);
    auto back = feedline::media::deserialize_frames(again, "again");
    const Buffer third = feedline::media::serialize_frames(*back);
    if (third.nbytes() != again.nbytes() ||
        std::memcmp(third.data(), again.data(), again.nbytes()) != 0) {
      std::abort();
    }
  } catch (const feedline::FormatError&) {
  }
  return 0;
}
