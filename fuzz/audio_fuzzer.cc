// SPDX-License-Identifier: Apache-2.0
//
// libFuzzer target: FFmpeg demux + decode from memory through load_audio(),
// as is and resampled to mono 8 kHz. A DecodeError is an expected outcome.

#include <cstddef>
#include <cstdint>
#include <span>

#include "feedline/base/error.h"
#include "feedline/media/audio.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  for (const feedline::media::AudioOptions& o :
       {feedline::media::AudioOptions{},
        feedline::media::AudioOptions{.sample_rate = 8000, .channels = 1}}) {
    try {
      feedline::Buffer b = feedline::media::load_audio(bytes, o, "fuzz");
      volatile int64_t n = b.numel();
      (void)n;
    } catch (const feedline::DecodeError&) {
    }
  }
  return 0;
}
