// SPDX-License-Identifier: Apache-2.0
//
// media::library_versions() and ffmpeg_decoders().

#include <string>
#include <utility>
#include <vector>

#include <libdeflate.h>
#include <png.h>

#include "feedline/media/audio.h"
#include "feedline/media/av.h"
#include "media/ffmpeg/ffmpeg.h"

#if __has_include(<jconfig.h>)
#include <jconfig.h>
#endif

namespace feedline::media {
namespace {

std::string av_version_text(unsigned version) {
  return std::to_string(AV_VERSION_MAJOR(version)) + "." +
         std::to_string(AV_VERSION_MINOR(version)) + "." +
         std::to_string(AV_VERSION_MICRO(version));
}

std::string turbojpeg_version() {
#ifdef LIBJPEG_TURBO_VERSION_NUMBER
  // major * 1000000 + minor * 1000 + patch.
  constexpr long kVersion = LIBJPEG_TURBO_VERSION_NUMBER;
  return std::to_string(kVersion / 1000000) + "." +
         std::to_string(kVersion / 1000 % 1000) + "." +
         std::to_string(kVersion % 1000);
#else
  return "unknown";
#endif
}

// The loaded libpng's version, major * 10000 + minor * 100 + release.
std::string png_version() {
  const png_uint_32 v = png_access_version_number();
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> library_versions() {
  return {
      {"libavformat", av_version_text(avformat_version())},
      {"libavcodec", av_version_text(avcodec_version())},
      {"libavutil", av_version_text(avutil_version())},
      {"libavfilter", av_version_text(avfilter_version())},
      {"libswscale", av_version_text(swscale_version())},
      {"libswresample", av_version_text(swresample_version())},
      {"libjpeg-turbo", turbojpeg_version()},
      {"libpng", png_version()},
      // libdeflate has no run-time version query: the headers' ("1.14").
      {"libdeflate", LIBDEFLATE_VERSION_STRING},
  };
}

std::vector<std::pair<std::string, std::string>> ffmpeg_decoders() {
  std::vector<std::pair<std::string, std::string>> out;
  void* it = nullptr;
  while (const AVCodec* codec = av_codec_iterate(&it)) {
    if (av_codec_is_decoder(codec) == 0) continue;
    out.emplace_back(avcodec_get_name(codec->id), codec->name);
  }
  return out;
}

}  // namespace feedline::media
