// SPDX-License-Identifier: Apache-2.0
//
// media::library_versions() and ffmpeg_decoders().

#include <algorithm>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "feedline/media/audio.h"
#include "feedline/media/av.h"

namespace feedline::media {
namespace {

TEST(InfoTest, LibraryVersionsNameEveryLibraryInOrder) {
  const auto versions = library_versions();
  std::vector<std::string> names;
  for (const auto& [name, version] : versions) {
    names.push_back(name);
    // libdeflate numbers its releases major.minor.
    const std::regex pattern(name == "libdeflate" ? R"(\d+\.\d+)"
                                                  : R"(\d+\.\d+\.\d+)");
    EXPECT_TRUE(std::regex_match(version, pattern)) << name << ": " << version;
  }
  EXPECT_EQ(names, (std::vector<std::string>{
                       "libavformat", "libavcodec", "libavutil", "libavfilter",
                       "libswscale", "libswresample", "libjpeg-turbo", "libpng",
                       "libdeflate"}));
}

TEST(InfoTest, FfmpegVersionsAgreeWithFfmpegVersionsText) {
  const std::string text = ffmpeg_versions();
  for (const auto& [name, version] : library_versions()) {
    if (name.rfind("libav", 0) == 0 || name.rfind("libsw", 0) == 0) {
      EXPECT_NE(text.find(name + " " + version), std::string::npos)
          << name << " " << version << " not in " << text;
    }
  }
}

TEST(InfoTest, LibavcodecIsAtLeastTheOldestSupported) {
  for (const auto& [name, version] : library_versions()) {
    if (name == "libavcodec") {
      EXPECT_GE(std::stoi(version), 59);
    }
  }
}

TEST(InfoTest, DecodersIncludeTheCodecsTheTestsUse) {
  const auto decoders = ffmpeg_decoders();
  auto has = [&](const std::string& codec, const std::string& decoder) {
    return std::find(decoders.begin(), decoders.end(),
                     std::pair{codec, decoder}) != decoders.end();
  };
  EXPECT_TRUE(has("h264", "h264"));
  EXPECT_TRUE(has("mjpeg", "mjpeg"));
  EXPECT_TRUE(has("png", "png"));
  EXPECT_TRUE(has("pcm_s16le", "pcm_s16le"));
}

}  // namespace
}  // namespace feedline::media
