// SPDX-License-Identifier: Apache-2.0
//
// Audio through FFmpeg: any container and codec FFmpeg can read, decoded to
// float32 planar samples of shape (channels, samples), as SPDL's load_audio
// returns by default.
//
// The input is encoded bytes in memory (a custom AVIO reads them in place).
// Resampling and channel mixing go through libswresample only when the
// options ask for another rate or channel count; otherwise samples are only
// converted to float, exactly as the ffmpeg CLI converts them.
//
// Errors: DecodeError naming the input and FFmpeg's reason for bytes that
// are not media, have no audio stream, use a codec this FFmpeg lacks, or fail
// to decode; InvalidArgument for bad options.
//
// Thread safety: every function may run concurrently; none keeps state.
// FFmpeg's own logging is silenced (feedline reports errors itself).

#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "feedline/base/buffer.h"

namespace feedline::media {

struct AudioOptions {
  int sample_rate = 0;  // 0: the stream's own
  int channels = 0;     // 0: the stream's own
  // Keep only [start, start + duration) seconds of the decoded audio.
  double start = 0;
  std::optional<double> duration;
};

struct AudioInfo {
  int sample_rate = 0;
  int channels = 0;
  std::string codec;
};

// Decodes the best audio stream of `data` to float32 (channels, samples).
Buffer load_audio(std::span<const uint8_t> data, const AudioOptions& options,
                  std::string_view name, AudioInfo* info = nullptr);

// "libavformat 59.27.100, libavcodec 59.37.100, ...".
std::string ffmpeg_versions();

// (library, "major.minor.micro") for each library feedline::media uses:
// libavformat, libavcodec, libavutil, libavfilter, libswscale,
// libswresample, libjpeg-turbo and libpng, in that order. The FFmpeg and
// libpng versions are those of the libraries loaded at run time; the
// libjpeg-turbo version is the one feedline was compiled against (TurboJPEG
// has no run-time version query), or "unknown" without its jconfig.h.
std::vector<std::pair<std::string, std::string>> library_versions();

// Sets FFmpeg's own log level (its AV_LOG_* values: -8 quiet, 16 error,
// 24 warning, 32 info); messages go to feedline's log sink (see
// feedline/base/log.h). feedline starts it quiet.
void set_ffmpeg_log_level(int level);

}  // namespace feedline::media
