// SPDX-License-Identifier: Apache-2.0
//
// clip_demo: a video clip pipeline on the native C++ API. Each item asks for
// one window of a video; load_video_clips decodes exactly that window (from
// the key frame before it) into a (N, H, W, 3) uint8 Buffer:
//
//   source(ClipRequest) -> load_video_clips[2] -> sink
//
// The video file is memory-mapped, not read, and no frame outside a window
// is converted. The consumer prints each clip's shape, then the engine's
// per-stage statistics.
//
// Usage: clip_demo [--video FILE] [--clips N] [--seconds S] [--threads N]
// Without --video, a 10 s 320x240 H.264 clip (25 fps, a key frame every
// second) is made first with the ffmpeg CLI and removed at the end. Clips of
// S seconds (default 1) start every 10 / N seconds. Exits with 1 if a clip
// is missing, 2 on bad arguments.

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "feedline/ops/av_ops.h"
#include "feedline/pipeline/builder.h"
#include "feedline/pipeline/stats.h"

namespace {

namespace fs = std::filesystem;
namespace ops = feedline::ops;
using feedline::media::Rational;
using feedline::media::Window;

constexpr int kVideoSeconds = 10;

int parse_positive(const char* text) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 1 || value > 1'000'000) return 0;
  return static_cast<int>(value);
}

void make_video(const fs::path& path) {
  const std::string cmd =
      "ffmpeg -v error -y -f lavfi -i testsrc2=size=320x240:rate=25:duration=" +
      std::to_string(kVideoSeconds) + " -c:v libx264 -pix_fmt yuv420p -g 25 " +
      path.string();
  if (std::system(cmd.c_str()) != 0)
    throw std::runtime_error("could not make the video: " + cmd);
}

int run(const std::string& video, int num_clips, int seconds, int num_threads) {
  // Clip i covers [i * 10 / N, i * 10 / N + S) seconds, as exact fractions.
  std::vector<ops::ClipRequest> clips;
  for (int i = 0; i < num_clips; ++i) {
    const Rational start{i * kVideoSeconds, num_clips};
    const Rational end{i * kVideoSeconds + seconds * num_clips, num_clips};
    clips.push_back(ops::ClipRequest::from_path(video, Window{start, end}));
  }
  auto pipeline = feedline::PipelineBuilder()
                      .add_source(clips, {.name = "clips"})
                      .pipe<feedline::Buffer>(
                          ops::load_video_clips({}),
                          {.name = "load_video_clips", .concurrency = 2})
                      .add_sink(2)
                      .build(num_threads);
  int got = 0;
  long long frames = 0;
  for (feedline::Buffer& clip : pipeline) {
    std::printf("clip %2d: %s\n", got++, clip.to_string().c_str());
    frames += clip.shape()[0];
  }
  std::printf("\n%d clips, %lld frames\n\n%s\n", got, frames,
              feedline::format_table(pipeline.stats()).c_str());
  if (got != num_clips) {
    std::fprintf(stderr, "error: expected %d clips, got %d\n", num_clips, got);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string video;
  int num_clips = 8;
  int seconds = 1;
  int num_threads = 2;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    int* target = nullptr;
    if (std::strcmp(argv[i], "--video") == 0 && has_value) {
      video = argv[++i];
      continue;
    }
    if (std::strcmp(argv[i], "--clips") == 0) target = &num_clips;
    if (std::strcmp(argv[i], "--seconds") == 0) target = &seconds;
    if (std::strcmp(argv[i], "--threads") == 0) target = &num_threads;
    if (target == nullptr || !has_value ||
        (*target = parse_positive(argv[++i])) == 0) {
      std::fprintf(stderr,
                   "usage: %s [--video FILE] [--clips N] [--seconds S] "
                   "[--threads N]\n",
                   argv[0]);
      return 2;
    }
  }
  const bool made = video.empty();
  if (made) {
    video = (fs::temp_directory_path() /
             ("feedline_clip_demo_" + std::to_string(getpid()) + ".mp4"))
                .string();
  }
  int rc = 1;
  try {
    if (made) make_video(video);
    rc = run(video, num_clips, seconds, num_threads);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
  }
  if (made) fs::remove(video);
  return rc;
}
