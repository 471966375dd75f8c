// SPDX-License-Identifier: Apache-2.0
//
// pipeline_demo: an image-loading job on the native C++ API, the shape of a
// training input pipeline:
//
//   source(paths) -> read_file[4] -> aggregate(32) -> decode_batch[2] -> sink
//
// read_file reads each JPEG; decode_batch decodes a batch of them straight
// into one (32, 224, 224, 3) uint8 Buffer (resized to the shorter side, then
// centre-cropped). The consumer shows progress in place, then prints
// throughput, CPU cost, peak memory and the engine's per-stage statistics.
//
// Usage: pipeline_demo [--dir DIR] [--items N] [--threads N]
// Without --dir, N JPEGs (320x240) are made first with the ffmpeg CLI in a
// temporary directory, removed at the end. With --dir, every .jpg/.jpeg/.png
// in DIR is read (--items is ignored). Exits with 1 if any image is missing
// from the output, 2 on bad arguments.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

#include "feedline/ops/io_ops.h"
#include "feedline/pipeline/builder.h"
#include "feedline/pipeline/stats.h"

namespace {

namespace fs = std::filesystem;
namespace ops = feedline::ops;

constexpr std::size_t kBatchSize = 32;

double seconds_of(const timeval& tv) {
  return static_cast<double>(tv.tv_sec) +
         static_cast<double>(tv.tv_usec) * 1e-6;
}

// Parses a positive integer flag value; returns 0 when it is not one.
int parse_positive(const char* text) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 1 || value > 100'000'000) return 0;
  return static_cast<int>(value);
}

// Makes `n` distinct 320x240 JPEGs in `dir` with the ffmpeg CLI (frames of
// its test pattern).
void make_images(const fs::path& dir, int n) {
  fs::create_directories(dir);
  const std::string cmd =
      "ffmpeg -v error -y -f lavfi -i testsrc2=size=320x240:rate=25 "
      "-frames:v " +
      std::to_string(n) + " -q:v 3 " + (dir / "img%05d.jpg").string();
  if (std::system(cmd.c_str()) != 0)
    throw std::runtime_error("could not make the images: " + cmd);
}

std::vector<std::string> images_in(const fs::path& dir) {
  std::vector<std::string> paths;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string ext = entry.path().extension().string();
    if (ext == ".jpg" || ext == ".jpeg" || ext == ".png")
      paths.push_back(entry.path().string());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

int run(const std::vector<std::string>& paths, int num_threads) {
  feedline::media::ImageOptions decode;
  decode.resize_shorter = 256;
  decode.crop_width = 224;
  decode.crop_height = 224;

  auto pipeline =
      feedline::PipelineBuilder()
          .add_source(paths, {.name = "paths"})
          .pipe<ops::EncodedFile>(ops::read_file(),
                                  {.name = "read", .concurrency = 4})
          .aggregate(kBatchSize)
          .pipe<feedline::Buffer>(ops::decode_batch(decode),
                                  {.name = "decode", .concurrency = 2})
          .add_sink(4)
          .build(num_threads);

  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto next_report = start;
  long long items = 0;
  int batches = 0;
  std::string shape;
  for (feedline::Buffer& batch : pipeline) {
    items += batch.shape()[0];
    ++batches;
    if (shape.empty()) shape = batch.to_string();
    const auto now = Clock::now();
    if (now >= next_report) {
      const double elapsed = std::chrono::duration<double>(now - start).count();
      std::fprintf(stderr, "\rbatches %5d  images %7lld  %8.0f images/s",
                   batches, items,
                   elapsed > 0 ? static_cast<double>(items) / elapsed : 0.0);
      next_report = now + std::chrono::milliseconds(250);
    }
  }
  const double wall =
      std::chrono::duration<double>(Clock::now() - start).count();
  std::fprintf(stderr, "\rbatches %5d  images %7lld  done%20s\n", batches,
               items, "");

  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double cpu = seconds_of(usage.ru_utime) + seconds_of(usage.ru_stime);
  const double n = static_cast<double>(std::max(items, 1LL));
  std::printf("images:       %lld of %zu (threads %d)\n", items, paths.size(),
              num_threads);
  std::printf("first batch:  %s\n", shape.c_str());
  std::printf("wall time:    %.3f s\n", wall);
  std::printf("throughput:   %.0f images/s\n",
              static_cast<double>(items) / wall);
  std::printf("CPU time:     %.3f s (%.1f us per image)\n", cpu, cpu / n * 1e6);
  // ru_maxrss is in KiB on Linux.
  std::printf("peak RSS:     %.1f MiB\n",
              static_cast<double>(usage.ru_maxrss) / 1024.0);
  const feedline::PipelineStats stats = pipeline.stats();
  std::printf("\n%s\n", feedline::format_table(stats).c_str());

  if (items != static_cast<long long>(paths.size())) {
    std::fprintf(stderr, "error: expected %zu images, got %lld\n", paths.size(),
                 items);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int num_items = 1000;
  int num_threads =
      static_cast<int>(std::max(2u, std::thread::hardware_concurrency()));
  std::string dir;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    int* target = nullptr;
    if (std::strcmp(argv[i], "--dir") == 0 && has_value) {
      dir = argv[++i];
      continue;
    }
    if (std::strcmp(argv[i], "--items") == 0) target = &num_items;
    if (std::strcmp(argv[i], "--threads") == 0) target = &num_threads;
    if (target == nullptr || !has_value ||
        (*target = parse_positive(argv[++i])) == 0) {
      std::fprintf(stderr, "usage: %s [--dir DIR] [--items N] [--threads N]\n",
                   argv[0]);
      return 2;
    }
  }
  const bool made = dir.empty();
  const fs::path data = made ? fs::temp_directory_path() /
                                   ("feedline_demo_" + std::to_string(getpid()))
                             : fs::path(dir);
  int rc = 1;
  try {
    if (made) make_images(data, num_items);
    rc = run(images_in(data), num_threads);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "\nerror: %s\n", e.what());
  }
  if (made) fs::remove_all(data);
  return rc;
}
