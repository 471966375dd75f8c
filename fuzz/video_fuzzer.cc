// SPDX-License-Identifier: Apache-2.0
//
// libFuzzer target: FFmpeg demux + decode + convert from memory through the
// feedline::media API: the fast load_video path whole and windowed, decode to
// the native format and through a filter chain with convert_frames, frame
// sampling, and streaming demux. Typed feedline errors are expected
// outcomes; anything else (a crash, a sanitizer report, another exception)
// is a finding.

#include <cstddef>
#include <cstdint>
#include <span>

#include "feedline/base/error.h"
#include "feedline/base/log.h"
#include "feedline/media/av.h"

namespace {

using feedline::media::DecodeConfig;
using feedline::media::DemuxConfig;
using feedline::media::Media;
using feedline::media::Rational;
using feedline::media::Source;
using feedline::media::VideoOptions;
using feedline::media::Window;

template <typename F>
void expect_typed_errors(F&& f) {
  try {
    f();
  } catch (const feedline::Error&) {
  } catch (const feedline::InvalidArgument&) {
  } catch (const feedline::OutOfRange&) {
  }
}

void touch(const feedline::Buffer& b) {
  volatile int64_t n = b.numel();
  (void)n;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Damaged packets are logged as warnings: noise at fuzzing rates.
  feedline::set_log_level(feedline::LogLevel::kError);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Source src{"", std::span<const uint8_t>(data, size), nullptr};
  expect_typed_errors([&] {
    VideoOptions o;
    o.max_frames = 8;
    touch(feedline::media::load_video(src, o, "fuzz"));
  });
  expect_typed_errors([&] {
    VideoOptions o;
    o.window = Window{Rational{1, 10}, Rational{3, 10}};
    touch(feedline::media::load_video(src, o, "fuzz"));
  });
  expect_typed_errors([&] {
    feedline::media::Demuxer d(src, DemuxConfig{}, "fuzz");
    auto packets = d.demux(Media::kVideo, std::nullopt);
    auto copy = packets->clone();
    auto frames = feedline::media::decode_packets(
        std::move(*packets), std::nullopt, DecodeConfig{}, 4);
    if (!frames->empty())
      touch(feedline::media::convert_frames(std::move(*frames)));
    if (copy->size() > 1) {
      auto sampled = feedline::media::sample_decode_video(
          std::move(*copy), {0, static_cast<int64_t>(copy->size()) - 1},
          std::string("scale=w=16:h=16,format=pix_fmts=rgb24"), DecodeConfig{});
      for (auto& f : sampled)
        touch(feedline::media::convert_frames(std::move(*f)));
    }
  });
  expect_typed_errors([&] {
    feedline::media::Demuxer d(src, DemuxConfig{}, "fuzz");
    auto packets =
        d.demux(Media::kAudio, Window{Rational{0, 1}, Rational{1, 2}});
    auto frames = feedline::media::decode_packets(
        std::move(*packets), std::string("aformat=sample_fmts=fltp"),
        DecodeConfig{}, std::nullopt);
    if (!frames->empty())
      touch(feedline::media::convert_frames(std::move(*frames)));
  });
  expect_typed_errors([&] {
    feedline::media::Demuxer d(src, DemuxConfig{}, "fuzz");
    std::vector<int> streams;
    for (int i = 0; i < d.num_streams() && i < 4; ++i) {
      try {
        d.stream_codec(i);
        streams.push_back(i);
      } catch (const feedline::InvalidArgument&) {
      }
    }
    if (streams.empty()) return;
    for (int chunk = 0; chunk < 64; ++chunk) {
      if (d.next_chunk(streams, 0, 3).empty()) break;
    }
  });
  return 0;
}
