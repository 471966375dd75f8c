// SPDX-License-Identifier: Apache-2.0
//
// consumer: reads image files (feedline::io) and decodes them to 16x16 RGB
// (feedline::media) in a pipeline (feedline::pipeline), then once more with
// the native ops read_file -> aggregate -> decode_batch (feedline::ops), as a
// program built against an installed feedline would.
//
// Usage: consumer IMAGE...
// Exits with 0 when every image decodes to the expected shape, 1 otherwise.

#include <cstdint>
#include <cstdio>
#include <exception>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "feedline/base/buffer.h"
#include "feedline/io/file.h"
#include "feedline/media/image.h"
#include "feedline/ops/io_ops.h"
#include "feedline/pipeline/builder.h"

namespace {

constexpr int kSize = 16;

struct File {
  std::string path;
  feedline::Buffer bytes;
};

struct Decoded {
  std::string path;
  std::string format;
  std::vector<int64_t> shape;
};

std::span<const uint8_t> bytes_of(const feedline::Buffer& buffer) {
  return {buffer.data_as<const uint8_t>(), buffer.nbytes()};
}

Decoded decode(const File& file) {
  feedline::media::ImageOptions options;
  options.resize_width = kSize;
  options.resize_height = kSize;
  const auto info =
      feedline::media::probe_image(bytes_of(file.bytes), file.path);
  const feedline::Buffer image =
      feedline::media::decode_image(bytes_of(file.bytes), options, file.path);
  return {file.path, info.format, image.shape()};
}

int run(std::vector<std::string> paths) {
  const std::size_t count = paths.size();
  auto pipeline = feedline::PipelineBuilder()
                      .add_source(std::move(paths))
                      .pipe(
                          [](std::string path) {
                            feedline::Buffer bytes = feedline::read_file(path);
                            return File{std::move(path), std::move(bytes)};
                          },
                          {.name = "read", .concurrency = 2})
                      .pipe(decode, {.name = "decode", .concurrency = 2})
                      .add_sink()
                      .build(2);

  std::size_t good = 0;
  for (const Decoded& image : pipeline) {
    const std::vector<int64_t> expected{kSize, kSize, 3};
    const bool ok = image.shape == expected;
    std::printf("%s: %s, %s\n", image.path.c_str(), image.format.c_str(),
                ok ? "16x16x3" : "wrong shape");
    good += ok ? 1 : 0;
  }
  if (good != count) {
    std::fprintf(stderr, "error: %zu of %zu images decoded as expected\n", good,
                 count);
    return 1;
  }
  return 0;
}

// The same images through feedline::ops, in one batch Buffer (N, 16, 16, 3).
int run_ops(std::vector<std::string> paths) {
  const auto count = static_cast<int64_t>(paths.size());
  feedline::media::ImageOptions options;
  options.resize_width = kSize;
  options.resize_height = kSize;
  auto pipeline =
      feedline::PipelineBuilder()
          .add_source(std::move(paths))
          .pipe<feedline::ops::EncodedFile>(feedline::ops::read_file())
          .aggregate(static_cast<std::size_t>(count))
          .pipe<feedline::Buffer>(feedline::ops::decode_batch(options))
          .add_sink()
          .build(2);
  int64_t images = 0;
  for (const feedline::Buffer& batch : pipeline) {
    const std::vector<int64_t> expected{count, kSize, kSize, 3};
    if (batch.shape() != expected) {
      std::fprintf(stderr, "error: decode_batch gave %s\n",
                   batch.to_string().c_str());
      return 1;
    }
    images += batch.shape()[0];
  }
  std::printf("decode_batch: %lld images in one batch\n",
              static_cast<long long>(images));
  return images == count ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s IMAGE...\n", argv[0]);
    return 1;
  }
  try {
    std::vector<std::string> paths(argv + 1, argv + argc);
    const int status = run(paths);
    return status != 0 ? status : run_ops(std::move(paths));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
